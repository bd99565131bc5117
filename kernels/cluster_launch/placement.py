"""Where and when each CTA of a launch ran: a near-empty kernel for the launch cost itself.

Every thread reads ``%globaltimer`` (the GPU-wide nanosecond timer) on entry and spins on it
until ``spin_ns`` nanoseconds have passed (``spin_ns = 0``: no spin, an empty kernel but for
the record), so a CTA stays resident for at least ``spin_ns``. Thread 0 of each CTA then
writes its record:

  times[TIMES * cta + 0]   %globaltimer at entry (ns)
  times[TIMES * cta + 1]   %globaltimer after the spin (ns)
  info[FIELDS * cta + 0]   %smid: the SM it ran on
  info[FIELDS * cta + 1]   %clusterid.x: its cluster (a cluster-free launch: 1x1x1 clusters)
  info[FIELDS * cta + 2]   %cluster_ctarank: its rank in the cluster
  info[FIELDS * cta + 3]   blockIdx.x

``cta`` is ``blockIdx.x``. The same binary runs under a plain launch and a cluster launch of
any size: nothing in it touches another CTA. The host checks every record was written.
"""
from numba import cuda, uint32
from tma_kernels.ptx import cluster_ctarank, clusterid_x, globaltimer, smid

TIMES = 2                       # uint64 per CTA in ``times``
FIELDS = 4                      # uint32 per CTA in ``info``

# (spin_ns, times, info)
SIGNATURE = "void(uint64, uint64[::1], uint32[::1])"


def record_placement(spin_ns, times, info):
    began = globaltimer()
    ended = began
    while ended - began < spin_ns:      # every thread spins: the CTA's warps stay resident
        ended = globaltimer()
    if cuda.threadIdx.x == 0:
        cta = cuda.blockIdx.x
        times[TIMES * cta] = began
        times[TIMES * cta + 1] = globaltimer()
        info[FIELDS * cta] = smid()
        info[FIELDS * cta + 1] = clusterid_x()
        info[FIELDS * cta + 2] = cluster_ctarank()
        info[FIELDS * cta + 3] = uint32(cta)
