"""One label per solution: the consensus of its labelers, and an adjudicator's final word.

**Who votes.** On a solution, the *regular* labels agreement counts (app/admin/agreement/:
labels by labelers, not quality-control or screening answers, not labels of a QC solution),
each labeler's latest. Of those, only labels that judge the solution vote: finished as
``found_error`` or ``solution``. A label that gave up, reported a bad problem or never
finished says nothing about the steps.

**The rule** (``rule.consensus``), per solution with two or more voting labels, step by step
from the first, on each label's rating of the solution's own step (completion 0, as
agreement compares; alternatives rated at an error are not voted on):

1. The voters at a step are the labels that rated it (a label that stopped at an earlier
   negative step no longer votes: it said the path was already wrong there).
2. *Error or not*: when more voters rated the step negative than not, it is the **first
   agreed error**: the consensus rates it -1 and ends there (``found_error``). When fewer
   did, the step is not an error and the walk goes on. When as many rated it negative as
   not (a tie, which is also how a first-error disagreement shows: two labelers who put
   the first error at different steps tie at the earlier one), the solution is **marked
   for adjudication** and has no consensus until an adjudicator gives one.
3. *Neutral or positive*: a step that is not an error gets +1 when more of its
   non-negative voters rated it +1 than 0, else 0. A tie between neutral and positive is
   not marked: it moves no first error and trains the same (the PRM counts neutral as
   correct, as in "Let's Verify Step by Step"), and 0 is the cautious reading.
4. Every step rated without an error: the consensus finishes as ``solution``.

So the consensus is always a path PRM800K could have written: ratings up to and including
its first -1, or every step without one. Its *method*: ``unanimous`` (every voter gave the
same ratings on the steps they share), ``majority`` (someone was outvoted), ``single``
(one voting label: taken as it is), or ``adjudicated``.

**Phase 1.** A phase-1 task shows candidates for each step and its labelers may go on
with different ones or write their own: after the first step their paths need not share a
step to vote on. Phase-1 labels are therefore not voted on: each stays its own line
(method ``phase1``), as in an ordinary export.

**Adjudication.** An admin resolves a solution on its drill-down page
(``/admin/agreement/items/ID``) by taking one labeler's ratings or editing the final
ratings; the ``adjudications`` table keeps the ratings, who gave them and when (one row
per solution, replaced by a later decision). An adjudication wins over the vote, on any
solution with a voting label, marked or not.
"""
