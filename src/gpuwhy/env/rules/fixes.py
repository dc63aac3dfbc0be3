"""Install commands that give a framework its GPU build, for the target interpreter and driver."""

from __future__ import annotations

from gpuwhy.env.rules.view import View
from gpuwhy.env.tables import framework_table, parse_version, tensorflow_build, version_text

TORCH_INDEX = framework_table("torch")["wheel_index"]


def base_version(version: str | None) -> str | None:
    """'2.13.0+cpu' -> '2.13.0'."""
    return version.split("+", 1)[0] if version else None


def pinned(package: str, version: str | None) -> str:
    return f'"{package}=={version}"' if version else f'"{package}"'


def tensorflow_gpu_install(view: View, uninstall: list[str] | None = None) -> str:
    """The official GPU install (Linux and WSL2: the and-cuda extra, references.md#tf-install;
    before 2.14 there was no extra and the CUDA libraries had to be installed separately)."""
    version = base_version(view.framework_version("tensorflow"))
    table = framework_table("tensorflow")
    if version and parse_version(version)[:2] < parse_version(table["and_cuda_extra_from"])[:2]:
        build = tensorflow_build(version) or {}
        command = view.pip(f"install {pinned('tensorflow', version)}") + (
            f" (then install CUDA {build['cuda']} and cuDNN {build['cudnn']}, which it was built"
            " with)"
            if build
            else ""
        )
    else:
        command = view.pip(f"install {pinned('tensorflow[and-cuda]', version)}")
    if uninstall:
        return f"{view.pip('uninstall -y ' + ' '.join(sorted(uninstall)))} && {command}"
    return command


def torch_gpu_install(view: View) -> str:
    """Reinstall torch as a CUDA build matching the driver when the driver is known."""
    version = base_version(view.framework_version("torch"))
    spec = pinned("torch", version)
    cuda = view.driver_cuda
    if view.platform == "linux" and (cuda is None or cuda[0] >= 13):
        # PyPI's Linux wheels are CUDA builds (CUDA 13 from torch 2.11: driver >= 580).
        command = view.pip(f"install --force-reinstall {spec} --index-url https://pypi.org/simple")
        since = parse_version(framework_table("torch")["pypi_linux_cuda13_from"])
        if cuda is None and parse_version(version)[:2] >= since:
            return f"{command} (a CUDA 13 build: it needs an NVIDIA driver >= 580)"
        return command
    if cuda is not None:
        variant = f"cu{cuda[0]}{cuda[1]}"
        return (
            view.pip(f"install --force-reinstall {spec} --index-url {TORCH_INDEX}{variant}")
            + f" (or the newest CUDA variant at or below {version_text(cuda)} that pytorch.org"
            f" lists for torch {version})"
        )
    return (
        view.pip(f"install --force-reinstall {spec} --index-url {TORCH_INDEX}cuXY")
        + " with cuXY the CUDA variant pytorch.org lists that your driver supports (nvidia-smi"
        " shows the driver's CUDA version)"
    )


def jax_gpu_install(view: View) -> str:
    """The CUDA plugin extra of JAX that the driver can run (cuda13 needs driver >= 580)."""
    version = base_version(view.framework_version("jax"))
    cuda = view.driver_cuda
    if cuda is not None:
        extra = "cuda13" if cuda[0] >= 13 else "cuda12"
        return view.pip(f"install {pinned(f'jax[{extra}]', version)}")
    return (
        view.pip(f"install {pinned('jax[cuda13]', version)}")
        + " (needs driver >= 580; with an older driver >= 525 use "
        + pinned("jax[cuda12]", version)
        + ")"
    )


def python_at_most(view: View, limit: str) -> bool:
    """Whether the target Python is at most `limit` (e.g. '3.10'); False when unknown."""
    version = view.python_version[:2]
    return bool(version) and version <= parse_version(limit)[:2]
