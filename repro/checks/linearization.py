"""Section 6.3's parsing as sequence transduction: trees to target sequences and back, on the code
the parser's training data and its scoring run (:mod:`repro.parsing.linearize`,
:mod:`repro.parsing.repair`, :mod:`repro.parsing.trees`).

Four things are measured:

- **the target form**: hand-built trees linearise to the sequences Vinyals & Kaiser et al. write
  (:data:`FORMS`: each closing bracket carries its label, every pre-terminal is ``XX``), in both units;

- **round trips**: a tree linearised (in both target units, symbols and per-word tokens) and read
  back over its words and tags is the same tree; a tree written on one line (what EVALB reads) and
  parsed back is the same tree; the per-word target is one token per word, token i ending in word
  i's ``XX`` (closing brackets after the last word a token of their own), which a round trip cannot
  see (reading splits the tokens back into symbols); repairing a well-formed sequence changes nothing
  and reports no fix.
  On hand-built trees that reach the corners (unary chains, one-word sentences, deep nesting,
  punctuation and bracket tags) and, where the data directory has it, on the trees of the NLTK
  Penn Treebank sample, pre-processed as the parser's data are;
- **refusals**: every malformed sequence (an unknown token, a closing label that differs from its
  opening one, an unclosed or an unopened bracket, an empty constituent, a second root, a word
  outside any constituent, too many or too few words) is refused by the strict inverse;
- **repairs**: each of those sequences, given to the repair the decoder's outputs go through, gives
  the tree the repair's documented rule gives (:data:`REPAIRS`: worked out by hand from the rules of
  :mod:`repro.parsing.repair`'s docstring) and says it was repaired.
"""

from __future__ import annotations

from nltk import Tree

from repro.checks.registry import checker
from repro.claims.claim import Claim
from repro.claims.outcome import CheckContext, Measurement
from repro.data.corpora import resolve_data_dir
from repro.errors import DataError
from repro.parsing.linearize import JOIN, LEAF, LinearizationError, delinearize, group_by_word, linearize
from repro.parsing.repair import repair
from repro.parsing.trees import parse_tree, preprocess, read_trees, tags, tree_to_line, words

#: Trees that reach the corners of the linearisation.
TREES = (
    "(S (NP (DT the) (NN cat)) (VP (VBZ sits) (PP (IN on) (NP (DT the) (NN mat)))) (. .))",
    "(S (VP (VB go)))",                                           # a unary chain over one word
    "(TOP (NP (NN yes)))",
    "(S (NP (NP (NN a)) (PP (IN of) (NP (NP (NN b)) (PP (IN of) (NP (NN c)))))) (VP (VBD was)))",
    "(S (`` ``) (NP (-LRB- -LRB-) (NNP X) (-RRB- -RRB-)) (, ,) (VP (VBD said) (SBAR (S (NP (PRP he)) "
    "(VP (VBD won))))) ('' '') (. .))",
    "(FRAG (ADVP (RB so)) (: :) (NP (CD 3) ($ $)) (. ?))",
)

#: Trees and their targets as Vinyals & Kaiser et al. write them (their Figure 2: "John has a dog ."), each
#: closing bracket labelled, every pre-terminal with its word XX, written out by hand: symbols, and per-word
#: tokens (each the run of symbols up to a word's XX, the closing brackets after the last word a token).
FORMS: tuple[tuple[str, str, str], ...] = (
    ("(S (NP (NNP John)) (VP (VBZ has) (NP (DT a) (NN dog))) (. .))",
     "(S (NP XX )NP (VP XX (NP XX XX )NP )VP XX )S",
     "(S_(NP_XX )NP_(VP_XX (NP_XX XX )NP_)VP_XX )S"),
    (TREES[0],
     "(S (NP XX XX )NP (VP XX (PP XX (NP XX XX )NP )PP )VP XX )S",
     "(S_(NP_XX XX )NP_(VP_XX (PP_XX (NP_XX XX )NP_)PP_)VP_XX )S"),
    (TREES[1], "(S (VP XX )VP )S", "(S_(VP_XX )VP_)S"),
)

#: The words every malformed sequence below is read over.
WORDS = ("a", "b")
#: Malformed sequences: what the strict inverse must refuse, and the tree (one line) the repair's
#: rules give over WORDS.
REPAIRS: tuple[tuple[str, str, str], ...] = (
    # "an unknown token is dropped"
    ("an unknown token", "(S XX foo XX )S", "(S (XX a) (XX b))"),
    # "a mismatched closing label is taken to close the innermost open constituent (its label kept)"
    ("a closing label that differs", "(S (NP XX )VP XX )S", "(S (NP (XX a)) (XX b))"),
    # "at the end, open constituents are closed"
    ("an unclosed bracket", "(S (NP XX )NP (VP XX )VP", "(S (NP (XX a)) (VP (XX b)))"),
    # "a ) with nothing open is dropped"
    ("a bracket that closes nothing", ")S (S XX XX )S", "(S (XX a) (XX b))"),
    # "constituents without words are removed"
    ("an empty constituent", "(S (NP )NP XX XX )S", "(S (XX a) (XX b))"),
    # "several top-level constituents are put under one TOP node"
    ("a second root", "(NP XX )NP (VP XX )VP", "(TOP (NP (XX a)) (VP (XX b)))"),
    # "words outside any constituent" are put under TOP with the rest
    ("a word outside any constituent", "XX (S XX )S", "(TOP (XX a) (S (XX b)))"),
    # "XX beyond the last word is dropped"
    ("more XX than words", "(S XX XX XX )S", "(S (XX a) (XX b))"),
    # "missing words are appended to the last top-level item holding words when a constituent"
    ("fewer XX than words", "(S (NP XX )NP )S", "(S (NP (XX a)) (XX b))"),
    # "an empty output becomes the flat tree (TOP (XX w1) ... (XX wn))"
    ("an empty output", "", "(TOP (XX a) (XX b))"),
)
#: NLTK's Penn Treebank sample in the data directory, and how many of its trees are read.
PTB_SAMPLE = "ptb-nltk-sample"
PTB_TREES = 100


def _round_trip(tree: Tree) -> list[str]:
    problems = []
    line = tree_to_line(tree)
    target, w, t = linearize(tree), words(tree), tags(tree)
    for unit, seq in (("symbols", target), ("per-word", group_by_word(target))):
        try:
            back = delinearize(seq, w, t)
        except LinearizationError as why:
            problems.append(f"{line[:60]}: its {unit} target refused ({why})")
            continue
        if not isinstance(back, Tree) or back != tree:
            shown = tree_to_line(back) if isinstance(back, Tree) else repr(back)
            problems.append(f"{line[:60]}: read back from {unit} as {shown[:60]}")
    pieces = [piece.split(JOIN) for piece in group_by_word(target).split()]
    if [piece[-1] == LEAF for piece in pieces[:len(w)]] != [True] * len(w) \
            or any(piece.count(LEAF) != (i < len(w)) for i, piece in enumerate(pieces)):
        problems.append(f"{line[:60]}: its per-word target is not one token per word, each ending in its {LEAF} "
                        f"({len(pieces)} tokens for {len(w)} words)")
    fixed = repair(target, w, t)
    if fixed.fixes or fixed.tree != tree:
        problems.append(f"{line[:60]}: a well-formed sequence repaired ({'; '.join(fixed.fixes) or 'changed'})")
    if parse_tree(line) != tree:
        problems.append(f"{line[:60]}: its one-line form parses to another tree")
    return problems


def sample_trees() -> tuple[list[Tree], str]:
    """The first PTB_TREES trees of the NLTK Penn Treebank sample of the data directory, pre-processed as the
    parser's data are (none where it is absent), and what they are."""
    folder = resolve_data_dir() / PTB_SAMPLE
    files = sorted(folder.rglob("*.mrg"))[:40] if folder.is_dir() else []
    trees: list[Tree] = []
    for path in files:
        try:
            trees += [t for t in (preprocess(s.tree) for s in read_trees(path)) if t is not None]
        except DataError:
            continue
        if len(trees) >= PTB_TREES:
            break
    return trees[:PTB_TREES], (f"{len(trees[:PTB_TREES])} trees of {PTB_SAMPLE}" if trees
                               else f"no {PTB_SAMPLE} in the data directory")


@checker("parse.linearization", audits=False)
def linearization(claim: Claim, ctx: CheckContext) -> Measurement:
    """Targets that are not Vinyals & Kaiser et al.'s (:data:`FORMS`), round trips that do not return the
    tree, malformed sequences the strict inverse accepts, and repairs that differ from the documented rule
    or do not say they repaired: their number."""
    problems: list[str] = []
    for text, symbols, per_word in FORMS:
        target = linearize(parse_tree(text))
        if (target, group_by_word(target)) != (symbols, per_word):
            problems.append(f"{text[:40]}: linearised as {target!r} / {group_by_word(target)!r}, Vinyals & Kaiser et al. "
                            f"write {symbols!r} / {per_word!r}")
    sample, where = sample_trees()
    trees = [parse_tree(text) for text in TREES] + sample
    for tree in trees:
        problems += _round_trip(tree)
    for what, sequence, repaired in REPAIRS:
        try:
            delinearize(sequence, WORDS)
            problems.append(f"{what} ({sequence!r}) accepted by the strict inverse")
        except LinearizationError:
            pass
        fixed = repair(sequence, WORDS)
        if tree_to_line(fixed.tree) != repaired or not fixed.fixes:
            problems.append(f"{what} ({sequence!r}) repaired to {tree_to_line(fixed.tree)} "
                            f"(fixes: {len(fixed.fixes)}), the rule gives {repaired}")
    return Measurement(len(problems), detail=(
        f"{len(FORMS)} targets against Vinyals & Kaiser et al.'s form; {len(trees)} trees round-tripped ({len(TREES)} built, {where}); {len(REPAIRS)} malformed sequences "
        + (f"; wrong: {'; '.join(problems[:4])}" if problems else "refused and repaired as documented")))
