"""Small infrastructure every face uses: option checks (`checks`), `--device` (`devices`), memory advice (`oom`),
portable artifacts (`portable`), user-handed safetensors (`tensor_file`), pickle-free training state
(`safe_state`), JSON files handed in (`json_file`), install hints for extras (`extras`) and the batch-job runner
(`jobs`, in-process or Ray). Nothing here imports torch at package load.
"""
