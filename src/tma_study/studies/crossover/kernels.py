"""The kernels the compile step builds for this study, with the SASS each must contain."""

# mechanism -> SASS mnemonics (prefixes) its producer must compile to
EXPECTED_SASS = {
    "tma_tile": ("UTMALDG.2D",),
    "bulk_copy": ("UBLKCP.S.G",),
    "cp_async": ("LDGSTS.E.BYPASS.128", "ARRIVES.LDGSTSBAR"),
    "plain_loads": ("LDG.E.128", "STS.128"),
}
CONSUMER_SASS = ("LDS.128", "SYNCS.PHASECHK")


def compile_list():
    """[(name, python function, signature, expected SASS prefixes)]."""
    from tma_kernels.crossover import (KERNEL_SIGNATURE, LATENCY_SIGNATURE, MECHANISMS, READ_SIGNATURE,
                                       latency_kernel, read_stream, stream_kernel)
    kernels = [(f"stream_{m}", stream_kernel(m), KERNEL_SIGNATURE, EXPECTED_SASS[m] + CONSUMER_SASS)
               for m in MECHANISMS]
    kernels += [(f"latency_{m}", latency_kernel(m), LATENCY_SIGNATURE, EXPECTED_SASS[m] + ("CS2R",))
                for m in MECHANISMS]
    kernels.append(("read_stream", read_stream, READ_SIGNATURE, ("LDG.E.128",)))
    return kernels
