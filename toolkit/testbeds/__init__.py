"""Real programs the tests and benchmarks run: the CPU inference server (`realserver`) and a
`torch.distributed` job that logs like a server (`nccl_job`)."""
