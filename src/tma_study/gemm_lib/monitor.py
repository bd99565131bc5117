"""SM clock, power, temperature and clock-event reasons of the GPU, read through NVML
(``cuda.bindings.nvml``, read-only queries), polled while a sample runs.

NVML's SM clock is the clock at the moment of the query; a sample's clock is the mean of the
readings taken while it ran (``Readings``). NVML's power usage is the board's draw as NVML
reports it (on recent GPUs averaged by the driver over a short window), in watts; the
clock-event reasons are the bitmask ``nvmlDeviceGetCurrentClocksEventReasons`` returns (OR over
the sample's readings; 0x4: software power cap, 0x8: hardware slowdown, 0x20 / 0x40: thermal).
Without NVML, ``Monitor`` reads nothing and the columns stay empty (``available`` says so).
"""
from __future__ import annotations

from dataclasses import dataclass, field

SW_POWER_CAP = 0x4                   # nvmlClocksEventReasonSwPowerCap


@dataclass
class Readings:
    """The NVML readings taken while one sample ran."""

    sm_clock_mhz: list[float] = field(default_factory=list)
    power_w: list[float] = field(default_factory=list)
    temperature_c: list[float] = field(default_factory=list)
    reasons: int = 0

    def columns(self) -> dict:
        def mean(values):
            return sum(values) / len(values) if values else float("nan")
        return {"sm_clock_mhz_mean": mean(self.sm_clock_mhz),
                "sm_clock_mhz_min": min(self.sm_clock_mhz, default=float("nan")),
                "clock_readings": len(self.sm_clock_mhz), "power_w_mean": mean(self.power_w),
                "temperature_c": max(self.temperature_c, default=float("nan")),
                "clocks_event_reasons": int(self.reasons),
                "power_capped": bool(self.reasons & SW_POWER_CAP)}


class Monitor:
    """NVML queries of one device, found by its PCI bus id."""

    def __init__(self, pci_bus_id: str | None):
        self.handle, self.nvml, self.why_not = None, None, ""
        try:
            nvml = _nvml_module()
            nvml.init_v2()
            self.handle = nvml.device_get_handle_by_pci_bus_id_v2(pci_bus_id)
            self.nvml = nvml
            self.read_into(Readings())            # every query works, or none is used
        except Exception as error:                # no NVML, or a query it refuses: recorded, not fatal
            self.handle, self.why_not = None, f"{type(error).__name__}: {error}"

    @property
    def available(self) -> bool:
        return self.handle is not None

    def describe(self) -> str:
        return ("NVML (cuda.bindings.nvml): SM clock, power usage, GPU temperature, clock-event reasons"
                if self.available else f"not available ({self.why_not}): clock, power and temperature not recorded")

    def read_into(self, readings: Readings, temperature: bool = False) -> None:
        """Append one reading of clock and power (and, when asked, temperature) to ``readings``."""
        if self.handle is None:
            return
        nvml, h = self.nvml, self.handle
        readings.sm_clock_mhz.append(float(nvml.device_get_clock_info(h, nvml.ClockType.CLOCK_SM)))
        readings.power_w.append(nvml.device_get_power_usage(h) / 1000.0)
        readings.reasons |= int(nvml.device_get_current_clocks_event_reasons(h))
        if temperature:
            readings.temperature_c.append(float(_temperature(nvml, h)))

    def temperature_c(self) -> float:
        return float(_temperature(self.nvml, self.handle)) if self.available else float("nan")


def _nvml_module():
    """cuda.bindings.nvml, else its experimental predecessor cuda.bindings._nvml (cuda-bindings 13.1)."""
    try:
        from cuda.bindings import nvml
    except ImportError:
        from cuda.bindings import _nvml as nvml
    return nvml


def _temperature(nvml, handle) -> float:
    """The GPU die's temperature in degrees C (NaN where this NVML refuses the query)."""
    try:
        value = nvml.device_get_temperature_v(handle, nvml.TemperatureSensors.TEMPERATURE_GPU)
    except Exception:            # the temperature is context, not a measured quantity: never fatal
        return float("nan")
    return float(getattr(value, "temperature", value))
