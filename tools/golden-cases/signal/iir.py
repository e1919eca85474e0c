"""IIR design and filtering: scipy.signal.butter(output='sos'), sosfilt and sosfiltfilt in float64
(scipy 1.10). butterworth_sos takes lowpass's cut-off as hi and highpass's as lo; iir_filter is
butter then sosfiltfilt (zero_phase) or sosfilt. f32 cases filter float32 data; their reference
is the float64 filter of the same (float32) values."""
import numpy as np
import scipy.signal as ss

PREFIX = "iir_"

DESIGNS = [  # name, order, fs, btype, lo, hi
    ("lowpass4", 4, 1.0, "lowpass", 0, 0.1),
    ("lowpass3", 3, 2.0, "lowpass", 0, 0.45),
    ("highpass3", 3, 2.0, "highpass", 0.3, 0),
    ("highpass6", 6, 100.0, "highpass", 1.5, 0),
    ("bandpass4_fmri", 4, 0.5, "bandpass", 0.01, 0.1),
    ("bandpass5", 5, 1.0, "bandpass", 0.05, 0.3),
    ("bandstop2", 2, 10.0, "bandstop", 1.0, 2.5),
    ("bandstop3", 3, 1.0, "bandstop", 0.2, 0.3),
    ("lowpass1", 1, 1.0, "lowpass", 0, 0.2),
]


def butter(order, fs, btype, lo, hi):
    wn = hi if btype == "lowpass" else lo if btype == "highpass" else [lo, hi]
    return ss.butter(order, wn, btype=btype, fs=fs, output="sos")


def design_opts(order, fs, btype, lo, hi):
    o = [("order", order), ("fs", repr(fs)), ("btype", btype)]
    if lo:
        o.append(("lo", repr(lo)))
    if hi:
        o.append(("hi", repr(hi)))
    return o


def cases(rng):
    for name, order, fs, btype, lo, hi in DESIGNS:
        yield dict(name=f"iir_butter_{name}_float64", op="butterworth_sos", dtype=np.float64,
                   inputs=[], outputs=[("out.npy", butter(order, fs, btype, lo, hi))],
                   options=design_opts(order, fs, btype, lo, hi),
                   generator="scipy.signal.butter(output='sos')")

    def sosfilt_case(tag, dt, shape, axis, design):
        sos = butter(*design)
        x = rng.standard_normal(shape).astype(dt)
        y = ss.sosfilt(sos, x.astype(np.float64), axis=axis)
        return dict(name=f"iir_sosfilt_{tag}_{np.dtype(dt).name}", op="sosfilt", dtype=dt,
                    inputs=[("x.npy", x)], files=[("sos.npy", sos)],
                    outputs=[("out.npy", y.astype(dt))],
                    options=[("sos", "sos.npy"), ("axis", axis)],
                    generator="scipy.signal.sosfilt in float64")

    yield sosfilt_case("a_bandpass_last", np.float64, (3, 150), -1, (4, 0.5, "bandpass", 0.01, 0.1))
    yield sosfilt_case("b_lowpass3_axis0", np.float64, (70, 3, 2), 0, (3, 2.0, "lowpass", 0, 0.45))
    yield sosfilt_case("c_highpass_mid", np.float64, (2, 90, 3), 1, (6, 100.0, "highpass", 1.5, 0))
    yield sosfilt_case("d_bandstop_1d", np.float64, (257,), 0, (3, 1.0, "bandstop", 0.2, 0.3))
    yield sosfilt_case("e_short", np.float64, (4, 2), -1, (2, 1.0, "bandpass", 0.1, 0.3))
    yield sosfilt_case("a_bandpass_last", np.float32, (3, 150), -1, (2, 1.0, "bandpass", 0.1, 0.3))
    yield sosfilt_case("b_lowpass3_axis0", np.float32, (70, 3, 2), 0, (3, 2.0, "lowpass", 0, 0.45))
    # a hand-made stable sos with zero b2 / a2 entries (first-order sections)
    sos = np.array([[0.5, 0.25, 0.0, 1.0, -0.6, 0.0], [1.0, -0.3, 0.2, 1.0, 0.5, 0.4]])
    x = rng.standard_normal((5, 60))
    yield dict(name="iir_sosfilt_f_handmade_float64", op="sosfilt", dtype=np.float64,
               inputs=[("x.npy", x)], files=[("sos.npy", sos)],
               outputs=[("out.npy", ss.sosfilt(sos, x, axis=-1))],
               options=[("sos", "sos.npy")], generator="scipy.signal.sosfilt in float64")

    def filtfilt_case(tag, dt, shape, axis, design, padtype="odd", padlen=None, sos=None):
        sos = butter(*design) if sos is None else sos
        x = rng.standard_normal(shape).astype(dt)
        kw = {} if padlen is None else {"padlen": padlen}
        y = ss.sosfiltfilt(sos, x.astype(np.float64), axis=axis,
                           padtype=None if padtype == "none" else padtype, **kw)
        opts = [("sos", "sos.npy"), ("axis", axis)]
        if padtype != "odd":
            opts.append(("padtype", padtype))
        if padlen is not None:
            opts.append(("padlen", padlen))
        return dict(name=f"iir_sosfiltfilt_{tag}_{np.dtype(dt).name}", op="sosfiltfilt",
                    dtype=dt, inputs=[("x.npy", x)], files=[("sos.npy", sos)],
                    outputs=[("out.npy", y.astype(dt))], options=opts,
                    generator="scipy.signal.sosfiltfilt in float64")

    yield filtfilt_case("a_odd_bandpass", np.float64, (3, 200), -1, (2, 0.5, "bandpass", 0.01, 0.1))
    yield filtfilt_case("b_even_axis0", np.float64, (120, 3), 0, (3, 1.0, "lowpass", 0, 0.2),
                        "even", 10)
    yield filtfilt_case("c_constant", np.float64, (2, 3, 80), 2, (4, 1.0, "highpass", 0.1, 0),
                        "constant")
    yield filtfilt_case("d_none", np.float64, (2, 50), -1, (2, 1.0, "bandstop", 0.2, 0.3), "none")
    yield filtfilt_case("e_padlen0", np.float64, (40,), 0, (1, 1.0, "lowpass", 0, 0.2), "odd", 0)
    yield filtfilt_case("f_bandpass4_fmri", np.float64, (4, 400), -1,
                        (4, 0.5, "bandpass", 0.01, 0.1))
    yield filtfilt_case("g_handmade", np.float64, (3, 30), -1, None,
                        sos=np.array([[0.5, 0.25, 0.0, 1.0, -0.6, 0.0],
                                      [1.0, -0.3, 0.2, 1.0, 0.5, 0.4]]))
    yield filtfilt_case("a_odd_bandpass", np.float32, (3, 200), -1, (2, 1.0, "bandpass", 0.1, 0.3))
    yield filtfilt_case("b_even_axis0", np.float32, (120, 3), 0, (3, 1.0, "lowpass", 0, 0.2),
                        "even", 10)

    def iirf_case(tag, dt, shape, design, zero_phase=True):
        order, fs, btype, lo, hi = design
        sos = butter(*design)
        x = rng.standard_normal(shape).astype(dt)
        xd = x.astype(np.float64)
        y = ss.sosfiltfilt(sos, xd, axis=-1) if zero_phase else ss.sosfilt(sos, xd, axis=-1)
        opts = design_opts(order, fs, btype, lo, hi)
        if not zero_phase:
            opts.append(("zero_phase", "false"))
        return dict(name=f"iir_filter_{tag}_{np.dtype(dt).name}", op="iir_filter", dtype=dt,
                    inputs=[("x.npy", x)], outputs=[("out.npy", y.astype(dt))], options=opts,
                    generator="scipy.signal.butter(output='sos') then sosfiltfilt / sosfilt, "
                              "float64")

    yield iirf_case("a_bandpass_fmri", np.float64, (3, 240), (2, 0.5, "bandpass", 0.01, 0.1))
    yield iirf_case("b_lowpass_causal", np.float64, (2, 3, 64), (4, 1.0, "lowpass", 0, 0.15),
                    False)
    yield iirf_case("a_bandpass_fmri", np.float32, (3, 240), (2, 0.5, "bandpass", 0.01, 0.1))
