"""The kernels the compile step builds for this study (name, Python function, signature)."""


def compile_list():
    from tma_kernels.crossover import (KERNEL_SIGNATURE, LATENCY_SIGNATURE, MECHANISMS, READ_SIGNATURE,
                                       latency_kernel, read_stream, stream_kernel)
    kernels = [(f"stream_{m}", stream_kernel(m), KERNEL_SIGNATURE) for m in MECHANISMS]
    kernels += [(f"latency_{m}", latency_kernel(m), LATENCY_SIGNATURE) for m in MECHANISMS]
    kernels.append(("read_stream", read_stream, READ_SIGNATURE))
    return kernels
