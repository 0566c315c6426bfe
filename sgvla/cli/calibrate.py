"""``sgvla calibrate camera``: a camera's intrinsics from ChArUco images, and optionally its pose in the
arm's base frame, written as the ROS camera_info YAML the camera nodes and the twin read."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

BOARD_FRAME = ("the board frame is OpenCV's: origin at the top-left corner of the board as generated/printed, "
               "x to the right along the first row, y down, z into the board")


def add_parser(sub) -> None:
    p = sub.add_parser("calibrate", help="Calibrate a camera from ChArUco board images.",
                       description="Calibration tools. `camera`: intrinsics and extrinsics from a ChArUco board.")
    targets = p.add_subparsers(dest="target", metavar="TARGET", required=True)
    c = targets.add_parser("camera", help="Intrinsics (and pose in the base frame) from ChArUco images.",
                           description="Finds the ChArUco board in each image, calibrates the intrinsics (OpenCV "
                                       "plumb_bob model) and writes OUT/NAME.yaml in ROS camera_info format. With "
                                       "--extrinsic-image and --board-pose, also the optical frame's pose in the "
                                       f"base frame from that view of the board lying still at that pose; {BOARD_FRAME}. "
                                       "Without them, the output file's existing extrinsics are kept (with --force). "
                                       "An existing OUT/NAME.yaml is never replaced without --force, so the shipped "
                                       "calibration/ files are only changed on purpose.")
    c.add_argument("--images", required=True, help="Folder of images, or a glob pattern (quote it).")
    c.add_argument("--board", required=True, metavar="SX,SY,SQUARE_M,MARKER_M[,DICT]",
                   help="Squares across and down, square and marker side in metres, ArUco dictionary "
                        "(default DICT_5X5_100), e.g. 7,5,0.04,0.03.")
    c.add_argument("--name", required=True, help="Camera name: the file is OUT/NAME.yaml (e.g. agentview).")
    c.add_argument("--extrinsic-image", type=Path, help="An image of the board lying at --board-pose.")
    c.add_argument("--board-pose", metavar="X,Y,Z,QX,QY,QZ,QW",
                   help="The board frame's pose in --parent-frame (metres, quaternion).")
    c.add_argument("--parent-frame", default="base_link", help="Frame of --board-pose (default: base_link).")
    c.add_argument("--k-coefficients", type=int, choices=(2, 3), default=2,
                   help="Radial distortion terms; 2 fixes k3 at 0, as ROS camera_calibration does (default 2).")
    c.add_argument("--out", type=Path, default=Path("."),
                   help="Output folder (default: the current folder); a rig reads the file by its path (a camera's "
                        "`calibration: path/NAME.yaml`), or by name from sgvla's calibration/ folder "
                        "(--out calibration --force replaces the shipped one).")
    c.add_argument("--force", action="store_true", help="Replace OUT/NAME.yaml if it exists.")
    c.set_defaults(func=run_camera, parser=c)


def run_camera(args: argparse.Namespace) -> int:
    import cv2

    from sgvla.so101.hardware.calibration import CalibrationError, load_camera_calibration, resolve_calibration_path
    from sgvla.so101.hardware.camera_calibration import (UNREADABLE, BoardSpec, Pose, calibrate_intrinsics, camera_pose,
                                                   load_images, write_camera_info)

    if (args.extrinsic_image is None) != (args.board_pose is None):
        args.parser.error("--extrinsic-image and --board-pose go together")
    out = args.out / f"{args.name}.yaml"
    if out.exists() and not args.force:  # before the work: a calibration takes a while and must not be lost
        print(f"error: {out} exists; pass --force to replace it (its extrinsics are kept unless --board-pose is "
              "given), or --out DIR to write elsewhere", file=sys.stderr)
        return 1
    try:
        spec = BoardSpec.parse(args.board)
        board_pose = Pose.parse(args.board_pose) if args.board_pose else None
        result = calibrate_intrinsics(load_images(args.images), spec, args.k_coefficients)
        for name in result.per_image:
            print(f"{name}: {result.corners[name]} corners, reprojection error {result.per_image[name]:.3f} px")
        for name, reason in result.skipped.items():
            if reason == UNREADABLE:  # a problem with the input, not a view that missed the board
                print(f"warning: {name}: skipped, {reason}", file=sys.stderr)
            else:
                print(f"{name}: skipped ({reason})")
        print(f"{len(result.per_image)} images, RMS reprojection error {result.rms:.3f} px\n"
              f"fx {result.k[0, 0]:.2f}  fy {result.k[1, 1]:.2f}  cx {result.k[0, 2]:.2f}  cy {result.k[1, 2]:.2f}  "
              f"distortion {[round(float(v), 5) for v in result.d]}")
        comment = (f"{args.name} camera, ROS camera_info format, calibrated by `sgvla calibrate camera` from "
                   f"{len(result.per_image)} ChArUco images\n(board {args.board}), RMS reprojection error "
                   f"{result.rms:.3f} px.")
        parent_frame, pose = "", None
        if board_pose is not None:
            image = cv2.imread(str(args.extrinsic_image))
            if image is None:
                raise CalibrationError(f"{args.extrinsic_image}: not a readable image")
            if image.shape[:2] != (result.height, result.width):
                raise CalibrationError(f"{args.extrinsic_image}: {image.shape[1]}x{image.shape[0]}, the calibration "
                                       f"images are {result.width}x{result.height}")
            pose, error = camera_pose(image, spec, result.k, result.d, board_pose)
            print(f"{args.extrinsic_image.name}: optical frame in {args.parent_frame}: translation "
                  f"{[round(v, 4) for v in pose.translation]} rotation_xyzw {[round(v, 4) for v in pose.rotation_xyzw]}"
                  f" (reprojection error {error:.3f} px)")
            parent_frame = args.parent_frame
            comment += (f" `extrinsics` (ignored by ROS parsers): the optical frame in {args.parent_frame}, from "
                        f"{args.extrinsic_image.name}\nwith the board at {args.board_pose}.")
        elif out.is_file() and load_camera_calibration(str(out)).parent_frame:
            previous = load_camera_calibration(str(out))
            parent_frame, pose = previous.parent_frame, Pose(previous.translation, previous.rotation_xyzw)
            print(f"extrinsics kept from {out}")
            comment += " `extrinsics` (ignored by ROS parsers) kept from the previous file."
    except CalibrationError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"wrote {write_camera_info(out, result.camera_info(args.name, parent_frame, pose), comment)}")
    if out.resolve() != resolve_calibration_path(args.name).resolve():
        print(f"a rig uses it with `calibration: {out.resolve()}` on its camera (the rig's `calibration: "
              f"{args.name}` reads sgvla's calibration/{args.name}.yaml)")
    if pose is not None:
        print("the URDF's camera frames come from these files: rerun `python -m sgvla.so101.urdf` to update urdf/so101.urdf")
    return 0
