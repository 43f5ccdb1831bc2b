"""Test helper: images written as PNG files (DeepGSM's file inputs)."""

from __future__ import annotations


def write_pngs(folder, images, prefix: str) -> list[str]:
    """Save each uint8 array of ``images`` as ``folder/<prefix><i>.png``; their paths."""
    from PIL import Image

    paths = []
    for i, im in enumerate(images):
        p = folder / f"{prefix}{i}.png"
        Image.fromarray(im).save(p)
        paths.append(str(p))
    return paths
