"""``crossmetric features``: embeddings of an image folder with a backbone, to an .npz file."""

from __future__ import annotations

import os
import sys

from crossmetric.cli._common import (
    CLIError,
    _check_int,
    _check_output_file,
    _check_outputs_not_inputs,
    _one_line,
    _parse_size,
)

#: ``crossmetric features`` without --pattern: every image file, id = path without extension
_ANY_IMAGE = r"(?i)(?P<id>.+)\.(?:png|jpe?g|bmp|gif|tiff?|webp|ppm|pgm)"


def cmd_features(args) -> int:
    """``crossmetric features``: embeddings of an image folder, written to an .npz file."""
    from crossmetric import datasets

    _check_output_file(args.out, "--out", (".npz",))
    _check_outputs_not_inputs({"--out": args.out}, {"--weights": args.weights})
    _check_int(args, "--batch-size", 1)
    size = _parse_size(args.size)
    try:
        from crossmetric.deep.backbones import build_backbone, extract_features, write_embeddings
    except ImportError as exc:  # PyTorch, an optional dependency
        raise CLIError(f"features needs PyTorch (pip install 'crossmetric[deep]'): "
                       f"{_one_line(exc)}") from None
    try:
        bunch = datasets.load_image_folder(args.images, args.pattern or _ANY_IMAGE, size=size)
    except (ValueError, OSError) as exc:
        raise CLIError(f"--images: {_one_line(exc)}") from None
    module = build_backbone(args.backbone, args.weights, random_state=args.seed,
                            normalize=None if args.normalize == "none" else args.normalize)
    X = extract_features(module, bunch.images, batch_size=args.batch_size, device=args.device)
    cams = {"cams": bunch.cams} if "cams" in bunch else {}   # a 'cam' group in --pattern
    write_embeddings(args.out, X, ids=bunch.ids, domains=bunch.domains,
                     filenames=bunch.filenames, **cams)
    print(f"crossmetric features: {X.shape[0]} images -> {X.shape[1]} features "
          f"({args.backbone}{', ' + os.path.basename(args.weights) if args.weights else ''}); "
          f"wrote {args.out}", file=sys.stderr)
    return 0
