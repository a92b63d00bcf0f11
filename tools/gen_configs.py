#!/usr/bin/env python3
"""Writes configs/experiments/*.ini: every combination the experiments need
({run, jump, fight, dance} x {shac, shac_bcg, shac_truncate, ppo} on
humanoid.xml with smoothed_kappa, plus shac_bcg with the soft model), with the
BCG paper's settings (docs/design.md sections 1.1 and 7.3); and the paper's own
robot and data: g1_{run, jump, fight, dance}_{shac_bcg, shac, ppo} on Unitree's
G1 with the LAFAN1 clips retargeted to it, and configs/sweeps/g1_kappa_{motion}.ini
(docs/g1.md). Run from the repository root: python3 tools/gen_configs.py"""
import os

MOTIONS = ["run", "jump", "fight", "dance"]

# domain randomisation for sim-to-sim transfer (both robots)
DR = """dr_friction_min = 0.5
dr_friction_max = 1.25
dr_mass_scale = 0.1
dr_com_offset = 0.02
dr_push_interval = 5
dr_push_velocity = 0.5
"""

COMMON = """[model]
path = /usr/share/mujoco/model/humanoid/humanoid.xml

[sim]
# paper: control step 0.02 s of 4 substeps of 0.005 s; actions are PD targets
substeps = 4
control_dt = 0.02
actuation = pd
# domain randomisation for sim-to-sim transfer (docs/design.md section 4.9): per-env
# friction, link masses (and inertias), centre-of-mass offsets, random pushes
""" + DR

CONTACT = {
    "kappa": "[contact]\n# paper: kappa = 300 for training, 10 solver iterations\nplugin = smoothed_kappa\nkappa = 300\niterations = 10\n",
    "soft": "[contact]\nplugin = soft\n",
}

TASK = """[task]
plugin = imitation
motion = models/motions/{motion}.csv
rsi = true
"""

SHAC = """[learner]
# BCG paper's SHAC+BCG settings (docs/design.md section 7.3)
plugin = shac
horizon = 32
actor_lr = 5e-3
critic_lr = 2e-3
lr_end = 1e-5
beta1 = 0.7
beta2 = 0.95
critics = 3
critic_iterations = 16
minibatches = 4
actor_grad_clip = 1.0
critic_grad_clip = 10.0
logstd_init = 0
ret_norm = true
actor_layers = 512,256,128
critic_layers = 256,256
"""

PPO = """[learner]
# BCG paper's PPO baseline (docs/design.md section 7.3)
plugin = ppo
steps_per_env = 24
entropy_coef = 0.0
init_noise_std = 0.3
actor_layers = 512,256,128
critic_layers = 256,256
"""

EST = {
    "shac": "[estimator]\nplugin = autodiff\n",
    "shac_bcg": "[estimator]\n# paper: B = 10, H = 2, tau = 400 N, sigma_p = 1 cm, sigma_v = 2 cm/s\nplugin = bcg\nbranches = 10\nduration = 2\nforce_threshold = 400\nsigma_p = 0.01\nsigma_v = 0.02\n",
    "shac_truncate": "[estimator]\nplugin = truncate\nforce_threshold = 400\n",
    "ppo": "[estimator]\nplugin = autodiff\n",
}


def run_section(name, learner):
    # paper: 64 envs (vanilla SHAC 128), PPO 4096 envs; 3000 iterations
    envs = {"shac": 128, "shac_bcg": 64, "shac_truncate": 64, "ppo": 4096}[learner]
    return f"[run]\nname = {name}\nseed = 0\nnum_envs = {envs}\niterations = 3000\ncheckpoint_every = 100\n\n"


# ---- Unitree G1 with the LAFAN1 clips (docs/g1.md) ---------------------------
# The files are the user's (licences: docs/g1.md); the configs expect them
# under data/ of the working directory, or model.path / task.motion overrides.
G1_MODEL = "data/unitree_g1/scene_29dof.xml"
G1_CLIP = "data/lafan1_g1/{motion}.csv"
# 10-s segments of the 2-4 minute clips (our choice; the paper does not give
# its segments): steady running, a crouch-and-jump passage, punches and
# steps, the most active dance passage (docs/g1.md lists how they were chosen)
G1_SEGMENT = {"run": (5, 15), "jump": (105, 115), "fight": (5, 15), "dance": (20, 30)}

G1_COMMON = f"""[model]
path = {G1_MODEL}
# paper: 4 contact spheres per foot (the G1 file's own); the link meshes
# touch the floor only in MuJoCo (bcg eval)
contact_bodies = left_ankle_roll_link, right_ankle_roll_link
mesh_contact_points = 0

[sim]
# paper: control step 0.02 s of 4 substeps of 0.005 s; actions are PD targets
substeps = 4
control_dt = 0.02
actuation = pd
action_scale = 0.25
# PD gains by joint (N m/rad, N m s/rad; the G1's motors have gear 1): legs as
# Unitree's unitree_rl_gym G1 (hip 100/2, knee 150/4, ankle 40/2); waist, arms
# and wrists our choice (docs/g1.md); torques clipped to the motors' limits
kp_joints = hip:100, knee:150, ankle:40, waist:100, shoulder:40, elbow:40, wrist:20
kd_joints = hip:2, knee:4, ankle:2, waist:3, shoulder:1, elbow:1, wrist:0.5
# domain randomisation for sim-to-sim transfer, as for humanoid.xml
""" + DR

G1_TASK = """[task]
plugin = imitation
# the public LAFAN1 retargeting CSV as it is (no header, 30 fps, x y z w)
motion = {clip}
motion_format = lafan
motion_start = {start}
motion_end = {end}
rsi = true
# the G1's pelvis is at 0.79 m standing and 0.46 m in the clips' deepest crouch
term_height = 0.3
"""


def g1_configs():
    out = "configs/experiments"
    for motion in MOTIONS:
        start, end = G1_SEGMENT[motion]
        task = G1_TASK.format(clip=G1_CLIP.format(motion=motion), start=start, end=end)
        for learner in ["shac_bcg", "shac", "ppo"]:
            name = f"g1_{motion}_{learner}"
            body = run_section(name, learner) + G1_COMMON + "\n" + CONTACT["kappa"] + "\n" + EST[learner] + "\n"
            body += (PPO if learner == "ppo" else SHAC) + "\n" + task
            write(out, name, body)
    # the kappa ablation (Table 1): SHAC+BCG at kappa 50, 100, 300, one sweep
    # file per motion (each motion has its own segment keys)
    for motion in MOTIONS:
        start, end = G1_SEGMENT[motion]
        name = f"g1_kappa_{motion}"
        body = run_section(name, "shac_bcg").replace("seed = 0\n", "")
        body += G1_COMMON + "\n" + CONTACT["kappa"] + "\n" + EST["shac_bcg"] + "\n" + SHAC + "\n"
        body += G1_TASK.format(clip=G1_CLIP.format(motion=motion), start=start, end=end)
        body += "\n[eval]\n# each run evaluated once trained (eval.h5): bcg report --paper builds Table 1 from them\n"
        body += "after_train = true\n"
        body += "\n[sweep]\n# Table 1 of the BCG paper: falls after transfer and Delta d per kappa\n"
        body += "contact.kappa = 50, 100, 300\n"
        write("configs/sweeps", name, body)


def main():
    out = "configs/experiments"
    os.makedirs(out, exist_ok=True)
    for motion in MOTIONS:
        for learner in ["shac", "shac_bcg", "shac_truncate", "ppo"]:
            name = f"{motion}_{learner}"
            body = run_section(name, learner) + COMMON + "\n" + CONTACT["kappa"] + "\n" + EST[learner] + "\n"
            body += (PPO if learner == "ppo" else SHAC) + "\n" + TASK.format(motion=motion)
            write(out, name, body)
        name = f"{motion}_shac_bcg_soft"
        body = run_section(name, "shac_bcg") + COMMON + "\n" + CONTACT["soft"] + "\n" + EST["shac_bcg"] + "\n"
        body += SHAC + "\n" + TASK.format(motion=motion)
        write(out, name, body)
    g1_configs()


def write(out, name, body):
    header = f"# {name}: generated by tools/gen_configs.py; edit that script, not this file\n"
    with open(os.path.join(out, name + ".ini"), "w") as f:
        f.write(header + body)


if __name__ == "__main__":
    main()
