"""One line of each kind of file ``steplabel import`` reads, as the Imports page shows
them: the same problem as MATH problem, as a model solution to label, and as a PRM800K
label of that solution. A test imports them, in that order."""

import json

_PROBLEM = "What is $1 + 2 \\cdot 3$?"
_STEPS = ["First $2 \\cdot 3 = 6$.", "Then $1 + 6 = 7$.\n\n# Answer\n\n7"]

EXAMPLE_LINES = {
    "prm800k": json.dumps(
        {
            "labeler": "e90a38f3-3135-4465-87af-3e6322e3d772",
            "timestamp": "2022-07-17T16:55:12.428751",
            "generation": 1,
            "is_quality_control_question": False,
            "is_initial_screening_question": False,
            "question": {
                "problem": _PROBLEM,
                "ground_truth_solution": "$1 + 2 \\cdot 3 = \\boxed{7}$.",
                "ground_truth_answer": "7",
                "pre_generated_steps": _STEPS,
                "pre_generated_answer": "7",
                "pre_generated_verifier_score": 0.93,
            },
            "label": {
                "steps": [
                    {
                        "completions": [{"text": text, "rating": 1, "flagged": None}],
                        "human_completion": None,
                        "chosen_completion": 0,
                    }
                    for text in _STEPS
                ],
                "total_time": 41000,
                "finish_reason": "solution",
            },
        }
    ),
    "problems": json.dumps(
        {
            "problem": _PROBLEM,
            "solution": "$1 + 2 \\cdot 3 = \\boxed{7}$.",
            "answer": "7",
            "subject": "Prealgebra",
            "level": 1,
            "unique_id": "test/prealgebra/1.json",
        }
    ),
    "solutions": json.dumps(
        {
            "unique_id": "test/prealgebra/1.json",
            "steps": _STEPS,
            "answer": "7",
            "score": 0.93,
            "generator": "my-model",
        }
    ),
}
