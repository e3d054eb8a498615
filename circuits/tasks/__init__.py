"""Tasks and prompt data: hand-crafted binary tasks and the task registry (`binary`), templated tasks for real
models (`real`: IOI, greater-than, capitals, Python closers), clean/corrupted prompt pairs and prompt files
(`pairs`), and the metrics computed on them (`metrics`)."""
