"""Build configuration beyond pyproject.toml: the optional C accelerator for record framing.

odradek/wire/_framing.c is the produce-path framing walk (odradek.wire.records.check_framing).
It is optional: without a C compiler or Python's headers the build only warns, and the
pure-Python walk (check_framing_py) runs instead. scripts/setup.sh installs gcc and the headers
on Debian when they are missing, and reinstalls when this file or the C source changes.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "odradek.wire._framing",
            sources=["odradek/wire/_framing.c"],
            optional=True,
            extra_compile_args=["-O2"],
        )
    ]
)
