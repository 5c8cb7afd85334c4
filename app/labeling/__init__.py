"""The labeler's side: the task queue, the labeling pages and the rules of a label."""
