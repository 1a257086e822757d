"""How large a size a command takes, refused in one line before any work (exit 2).

A *hard* limit is where the work cannot be done at all (memory, numeric range) and nothing
lifts it; a *soft* limit is far beyond any setting of the paper or of this project's recipes,
where a value is far more likely a typo (``--beam 1e9``, ``--seeds 10000``) than a plan, and
``--force`` lifts it up to the hard one.

=====================  ======  ==========  =====================================================
size                   soft    hard        why
=====================  ======  ==========  =====================================================
``--beam``             64      1024        the paper: 4 (translation), 21 (parsing)
``--max-len-offset``   1000    the model   the paper: 50, 300; an output cannot outgrow the
                                           model's positional table (``max_positions``)
``--confidence-n``     100000  10000000    sacreBLEU's default: 1000 resamples
``--alpha``            --      10          the paper: 0.6 and 0.3; lp(Y)**10 still fits a float
``--seeds``            10      1000        each seed is a whole training run
``max_positions``      --      65536       the positional table is built whole
model parameters       --      10**10      the paper's big model has 213 million; 10**10 are
                                           40 GB of weights alone
seeds (``--seed``)     --      2**31 - 1   the range every random generator here takes
``threads``            --      1024        torch's thread pool (10**8 threads crash it)
tokens per update      --      10**9       ``tokens_per_batch``, ``max_tokens_per_device``: the
                                           paper's ~25000; the update plan's ceil(a / b) is
                                           exact in float64 far beyond it
``lr_scale``           --      10**6       Eq. 3 with lr_scale 1 peaks at 7e-4 (base); a rate
                                           near 10**38 overflows Adam's float32 step
job time limit (min)   --      2**32 - 3   SLURM keeps it as a 32-bit count of minutes, its
                                           last values meaning "none" (``--timeout-min``,
                                           a profile's ``time_limit_min``)
profile counts         --      2**32 - 3   a cluster profile's nodes, GPUs, tasks, CPUs, memory,
                                           requeues and token budget: SLURM's 32-bit counts
tree depth (evalb)     --      4000        Penn Treebank trees nest a few dozen deep; EVALB's
                                           bracket matching is quadratic in the brackets
JSON/TOML nesting      --      100         records, configs and claims nest a few levels; a
                                           parser or validator recurses once per level
record file            --      64 MiB      a JSON/TOML record, config, claims file, ledger or
                                           vocabulary (a 37000-token vocabulary: ~2 MiB)
text file read whole   --      4 GiB       hypotheses, references, trees, inputs to translate
a line of text         --      1 MiB       a sentence or a tree; /dev/zero piped in has no end
=====================  ======  ==========  =====================================================
"""

from __future__ import annotations

from dataclasses import dataclass

from repro.errors import UsageError


@dataclass(frozen=True)
class Limit:
    """The largest value a size may take: ``soft`` (lifted by ``--force``) and ``hard``."""

    name: str
    hard: int | float
    soft: int | float | None = None
    why: str = ""

    def check(self, value: int | float, *, force: bool = False) -> int | float:
        """``value`` if it lies within the limits (``force`` lifts the soft one); else UsageError."""
        if value > self.hard:
            raise UsageError(f"{self.name} {value}: at most {self.hard} ({self.why})")
        if self.soft is not None and value > self.soft and not force:
            raise UsageError(f"{self.name} {value}: more than {self.soft} ({self.why}); pass --force to run it anyway "
                             f"(at most {self.hard})")
        return value


BEAM = Limit("--beam", soft=64, hard=1024, why="Section 6.1 uses a beam of 4, Section 6.3 one of 21")
MAX_LEN_OFFSET = Limit("--max-len-offset", soft=1000, hard=65536,
                       why="Section 6.1 allows input + 50 tokens, Section 6.3 input + 300")
CONFIDENCE_N = Limit("--confidence-n", soft=100_000, hard=10_000_000,
                     why="sacreBLEU's bootstrap takes 1000 resamples")
SEEDS = Limit("--seeds", soft=10, hard=1000, why="each seed is a whole training run")
MAX_POSITIONS = Limit("max_positions", hard=65536,
                      why="the positional table is built whole; the paper's outputs are at most input + 300 tokens")
SEED = Limit("seed", hard=2**31 - 1, why="the range every random generator here takes")
MODEL_PARAMETERS = Limit("model parameters", hard=10**10,
                         why="the paper's big model has 213 million; 10**10 parameters are 40 GB of fp32 weights alone")
TIMEOUT_MIN = Limit("--timeout-min", hard=2**32 - 3,
                    why="SLURM keeps a job's time limit as a 32-bit count of minutes, its last values meaning none")
SLURM_COUNT = Limit("a cluster profile's counts", hard=2**32 - 3,
                    why="SLURM keeps node, task, CPU and memory counts in 32 bits, its last values meaning none; "
                        "every count of a profile is held to it")
TOKENS = Limit("tokens per update", hard=10**9,
               why="Section 5.1's update holds ~25000 tokens per side; the update plan divides token counts "
                   "in float64, exact for counts far beyond this and not for 10**30")
LR_SCALE = Limit("lr_scale", hard=10**6,
                 why="Eq. 3 with lr_scale 1 peaks at 7e-4 for the base model; a scale near 10**40 overflows "
                     "Adam's float32 step (a traceback in its first update)")
THREADS = Limit("threads", hard=1024, why="torch's intra-op thread pool; far more threads than cores only slow it down")
ALPHA = Limit("--alpha", hard=10, why="Section 6.1 uses 0.6, Section 6.3 0.3; the length penalty ((5 + |Y|) / 6)^alpha "
              "overflows a float far above it")
TREE_DEPTH = Limit("tree depth", hard=4000,
                   why="Penn Treebank trees nest a few dozen brackets deep, a weak parser's output at most its "
                       "input + 300 openers (Section 6.3); EVALB's bracket matching takes time quadratic in the "
                       "brackets")
NESTING = Limit("nesting", hard=100, why="records, configs and claims nest a few levels deep; parsers and validators "
                "recurse once per level")
RECORD_BYTES = Limit("record file size", hard=64 * 2**20,
                     why="a JSON or TOML record, config, claims file, ledger or vocabulary; a 37000-token vocabulary "
                         "takes about 2 MiB")
TEXT_BYTES = Limit("text file size", hard=4 * 2**30, why="a text file read whole (hypotheses, references, trees)")
LINE_BYTES = Limit("line length", hard=2**20, why="a sentence or a tree is far shorter; a stream without newlines "
                   "(/dev/zero piped in) has no end")
