"""Agreement between labelers: how far the step labels of one solution can be trusted.

Which labels count. *Regular* labels: labels by labelers (an admin's are not labeling work),
not quality-control or screening labels and not labels of a QC solution (those have a gold
label and their own accuracy figures), within the ``generation`` filter when one is given.
Agreement needs a solution that two or more distinct labelers labeled (phase-1 labels have
no shared solution, so they never count); when one labeler labeled a solution twice, only
their latest label counts.

A *step* (the unit of agreement) is one step of such a solution; its ratings are the ratings
the labelers gave the solution's own step (completion 0, as in PRM800K: alternatives at the
first error are other completions and are not compared). Phase-2 labels stop at the first
negative step, so later steps are unreached, not disagreements: a step counts when two or
more labelers rated it, with the ratings of those labelers only.

The figures:

- Krippendorff's alpha, ordinal metric on -1 < 0 < +1;
- Fleiss' kappa, generalized to a varying number of raters per step (app/admin/reliability.py);
- observed agreement: the share of pairs of ratings of one step that are equal;
- Cohen's kappa and linearly weighted kappa for every pair of labelers, on the steps both rated;
- per labeler: observed agreement and Cohen's kappa of their ratings against the others'
  ratings of the same steps, pooled (one item per pair of ratings);
- first-error agreement, over pairs of labels of one solution by different labelers: a label
  states a first error when it has a negative step (its first), or "no error" when it finished
  as ``solution`` with none; labels that gave up or stopped otherwise state nothing and are left
  out. *Exact*: the same first-error step, or both no error. *Within one step*: exact, or errors
  at most one step apart;
- finish_reason agreement: over the same pairs of labels, the share with the same reason (labels
  without a reason are left out);
- per labeler, over all their regular labels: the shares of labels that gave up, reported a
  bad problem, or flagged a step;
- beside agreement, accuracy against gold labels, from app/quality/scoring.py (the figures of
  the quality-control page, not computed again): per labeler their QC accuracy (step ratings
  and first error) and screening score, per generation and overall the QC answers pooled.
  With a generation filter, QC answers are those served in that generation; the screening
  score is always over every screening answer.

Every figure comes with the number of steps or pairs behind it, and is None where undefined.

The package: ``queries`` says which labels count, in SQL, and reads them as arrays;
``metrics`` computes the figures from those arrays (numpy, no database); ``views`` assembles
the report the page and the API show, and how the page presents it.
"""
