#!/bin/bash
# bench/device_ladder.sh - the learning-ladder sweep of docs/learning.md on the
# device machine's CPUs: 16 single-thread SHAC runs side by side (stand with
# SHAC+BCG and autodiff SHAC and their variants: no position correction,
# lower action noise, lower actor LR, 32 environments, horizon 16; walk; the
# locomotion rung), through bench/device_train.sh (E_fixed of every
# checkpoint in bcg, the transfer evaluation of each final policy in MuJoCo
# and bcg).
#
#   run(command="bash bench/device_ladder.sh", carry=["build-debs", "deps"])
#
# SWEEP=1: the first sweep (330 s, ITERS=700); SWEEP=2 (default): the second
# (TRAIN_SECONDS=480); SWEEP=3: the third (TRAIN_SECONDS=450); SWEEP=4: the
# fourth (TRAIN_SECONDS=480; rungs 0, 2, 3 with PPO on the GPU); SWEEP=5: the
# fifth (TRAIN_SECONDS=480); SWEEP=6 to 9: see below. Results:
# bench/results/*ladder_sweep*.
# Environment: TRAIN_SECONDS (default 330), ITERS (the [run] iterations
# budget and so the length of the linear LR decay, default 700), LADDER_RUNS
# (the RUNS list of device_train.sh; the default is below).
set -u
cd "$(dirname "$0")/.."
S=${TRAIN_SECONDS:-330}
IT=${ITERS:-1000}
C=configs/ladder
O="run.iterations=$IT run.checkpoint_every=100"
D1="s_bcg|$C/stand_shac_bcg.ini|$O"
D1="$D1;s_ad|$C/stand_shac.ini|$O"
D1="$D1;s_bcg_erp0|$C/stand_shac_bcg.ini|$O contact.erp=0"
D1="$D1;s_ad_erp0|$C/stand_shac.ini|$O contact.erp=0"
D1="$D1;s_bcg_ls2|$C/stand_shac_bcg.ini|$O learner.logstd_init=-2"
D1="$D1;s_ad_ls2|$C/stand_shac.ini|$O learner.logstd_init=-2"
D1="$D1;s_bcg_lr5e4|$C/stand_shac_bcg.ini|$O learner.actor_lr=5e-4"
D1="$D1;s_ad_lr5e4|$C/stand_shac.ini|$O learner.actor_lr=5e-4"
D1="$D1;s_bcg_n32|$C/stand_shac_bcg.ini|$O run.num_envs=32"
D1="$D1;s_ad_n32|$C/stand_shac.ini|$O run.num_envs=32"
D1="$D1;s_bcg_h16|$C/stand_shac_bcg.ini|$O learner.horizon=16"
D1="$D1;s_bcg_lr1e3ls15|$C/stand_shac_bcg.ini|$O learner.actor_lr=1e-3 learner.logstd_init=-1.5"
D1="$D1;w_bcg|$C/walk_shac_bcg.ini|$O"
D1="$D1;w_ad|$C/walk_shac.ini|$O"
D1="$D1;l_ad|$C/locomotion_shac.ini|$O"
D1="$D1;l_bcg|$C/locomotion_shac_bcg.ini|$O"
# sweep 2: action noise std e^-2 (found in sweep 1) on more seeds, walk and locomotion
D2="s_bcg_ls2_s1|$C/stand_shac_bcg.ini|$O learner.logstd_init=-2 run.seed=1"
D2="$D2;s_bcg_ls2_s2|$C/stand_shac_bcg.ini|$O learner.logstd_init=-2 run.seed=2"
D2="$D2;s_bcg_ls2_s3|$C/stand_shac_bcg.ini|$O learner.logstd_init=-2 run.seed=3"
D2="$D2;s_bcg_ls25|$C/stand_shac_bcg.ini|$O learner.logstd_init=-2.5"
D2="$D2;s_ad_ls2_s1|$C/stand_shac.ini|$O learner.logstd_init=-2 run.seed=1"
D2="$D2;w_bcg_ls2|$C/walk_shac_bcg.ini|$O learner.logstd_init=-2"
D2="$D2;w_ad_ls2|$C/walk_shac.ini|$O learner.logstd_init=-2"
D2="$D2;w_bcg_ls2_n32|$C/walk_shac_bcg.ini|$O learner.logstd_init=-2 run.num_envs=32"
D2="$D2;w_bcg_ls2_h16|$C/walk_shac_bcg.ini|$O learner.logstd_init=-2 learner.horizon=16"
D2="$D2;w_bcg_ls25|$C/walk_shac_bcg.ini|$O learner.logstd_init=-2.5"
D2="$D2;l_ad_ls2|$C/locomotion_shac.ini|$O learner.logstd_init=-2"
D2="$D2;l_ad_motor|$C/locomotion_shac.ini|$O sim.actuation=motor"
D2="$D2;l_bcg_ls2|$C/locomotion_shac_bcg.ini|$O learner.logstd_init=-2"
D2="$D2;l_ad_motor_n64|$C/locomotion_shac.ini|$O sim.actuation=motor run.num_envs=64"
D2="$D2;l_ad_ls2_sp1|$C/locomotion_shac.ini|$O learner.logstd_init=-2 task.target_speed=1.0"
D2="$D2;s_ad_ls2_lr1e3|$C/stand_shac.ini|$O learner.logstd_init=-2 learner.actor_lr=1e-3"
# sweep 3 (after the continuity fixes; ladder configs at action std e^-2):
# stand seeds x actor LR, walk, locomotion
D3="s_bcg_s0|$C/stand_shac_bcg.ini|$O"
for sd in 1 2 3; do D3="$D3;s_bcg_s$sd|$C/stand_shac_bcg.ini|$O run.seed=$sd"; done
for sd in 0 1 2 3; do D3="$D3;s_bcg_lr1e3_s$sd|$C/stand_shac_bcg.ini|$O run.seed=$sd learner.actor_lr=1e-3"; done
D3="$D3;s_ad_s0|$C/stand_shac.ini|$O;s_ad_s1|$C/stand_shac.ini|$O run.seed=1"
D3="$D3;w_bcg_h16|$C/walk_shac_bcg.ini|$O learner.horizon=16"
D3="$D3;w_bcg_h16_lr1e3|$C/walk_shac_bcg.ini|$O learner.horizon=16 learner.actor_lr=1e-3"
D3="$D3;w_ad_h16|$C/walk_shac.ini|$O learner.horizon=16"
D3="$D3;w_bcg|$C/walk_shac_bcg.ini|$O"
D3="$D3;l_ad|$C/locomotion_shac.ini|$O;l_bcg_h16|$C/locomotion_shac_bcg.ini|$O learner.horizon=16"
# sweep 4: rung 0 with the locomotion task's progress term and friction
# randomisation up to 2, rung 2 SHAC+BCG variants, rung 3 (run, jump) for
# SHAC+BCG and autodiff SHAC (CPU, one thread each) and PPO (4096
# environments on the GPU, 2 threads each); TRAIN_SECONDS=480
L="run.checkpoint_every=100"
D4="l_ad|$C/locomotion_shac.ini|$L;l_ad_s1|$C/locomotion_shac.ini|$L run.seed=1"
D4="$D4;l_bcg|$C/locomotion_shac_bcg.ini|$L;l_bcg_s1|$C/locomotion_shac_bcg.ini|$L run.seed=1"
D4="$D4;w_bcg|$C/walk_shac_bcg.ini|$O;w_bcg_s1|$C/walk_shac_bcg.ini|$O run.seed=1"
D4="$D4;w_bcg_lr1e3|$C/walk_shac_bcg.ini|$O learner.actor_lr=1e-3"
D4="$D4;w_bcg_lr1e3_s1|$C/walk_shac_bcg.ini|$O learner.actor_lr=1e-3 run.seed=1"
D4="$D4;r_bcg|$C/run_shac_bcg.ini|$O;r_ad|$C/run_shac.ini|$O"
D4="$D4;j_bcg|$C/jump_shac_bcg.ini|$O;j_ad|$C/jump_shac.ini|$O"
D4="$D4;r_ppo|$C/run_ppo.ini|run.device=cuda run.threads=2;j_ppo|$C/jump_ppo.ini|run.device=cuda run.threads=2"
# sweep 5: rung 0 with DiffRL's critic settings (target_alpha 0.995, critic
# LR 5e-4) and the progress weight; rung 2 SHAC+BCG at actor LR 1e-3 on more
# seeds and 32 environments; rung 3 run at actor LR 1e-3; PPO on jump alone on
# the GPU (one CUDA process per GPU: bench/GPU_NOTES.md); TRAIN_SECONDS=480
DF="$L learner.target_alpha=0.995 learner.critic_lr=5e-4"
D5="l_ad_df|$C/locomotion_shac.ini|$DF;l_ad_df_s1|$C/locomotion_shac.ini|$DF run.seed=1"
D5="$D5;l_ad_df_p05|$C/locomotion_shac.ini|$DF task.w_progress=0.5"
D5="$D5;l_ad_df_v1|$C/locomotion_shac.ini|$DF task.target_speed=1"
D5="$D5;l_bcg_df|$C/locomotion_shac_bcg.ini|$DF;l_bcg_df_h16|$C/locomotion_shac_bcg.ini|$DF learner.horizon=16"
W="$O learner.actor_lr=1e-3"
D5="$D5;w_bcg_lr1e3_s2|$C/walk_shac_bcg.ini|$W run.seed=2;w_bcg_lr1e3_s3|$C/walk_shac_bcg.ini|$W run.seed=3"
D5="$D5;w_bcg_lr5e4|$C/walk_shac_bcg.ini|$O learner.actor_lr=5e-4;w_bcg_lr1e3_n32|$C/walk_shac_bcg.ini|$W run.num_envs=32"
D5="$D5;r_bcg_lr1e3|$C/run_shac_bcg.ini|$W;r_ad_lr1e3|$C/run_shac.ini|$W"
D5="$D5;r_ad_h32|$C/run_shac.ini|$O learner.horizon=32"
D5="$D5;j_ppo|$C/jump_ppo.ini|run.device=cuda run.threads=3"
# sweep 6: rung 0 with the self-collision penalty (w_self) on seeds; rung 3 on
# the regenerated run clip for SHAC+BCG, SHAC and PPO; TRAIN_SECONDS=470
D6="r_bcg|$C/run_shac_bcg.ini|$O;r_bcg_lr1e3|$C/run_shac_bcg.ini|$O learner.actor_lr=1e-3;r_ad|$C/run_shac.ini|$O"
for sd in 0 1 2 3 4; do D6="$D6;l_ad_s$sd|$C/locomotion_shac.ini|$L run.seed=$sd"; done
for sd in 0 1 2 3 4; do D6="$D6;l_bcg_s$sd|$C/locomotion_shac_bcg.ini|$L run.seed=$sd"; done
D6="$D6;r_ppo|$C/run_ppo.ini|run.device=cuda run.threads=3"
# sweep 7: the ladder configs with the transfer penalties (w_limit, self_margin)
# on seeds: stand 4 seeds (350 it.), walk 6 seeds (700 it.), run SHAC+BCG and
# SHAC 2 seeds each, PPO on the regenerated run clip on the GPU; TRAIN_SECONDS=480
# (walk and run may need a second call with --resume)
D7="r_ppo|$C/run_ppo.ini|run.device=cuda run.threads=3"
for sd in 0 1 2 3; do D7="$D7;s_bcg_s$sd|$C/stand_shac_bcg.ini|run.iterations=350 run.checkpoint_every=50 run.seed=$sd"; done
for sd in 0 1 2 3 4 5; do D7="$D7;w_bcg_s$sd|$C/walk_shac_bcg.ini|run.iterations=700 run.checkpoint_every=100 run.seed=$sd"; done
for sd in 0 1; do D7="$D7;r_bcg_s$sd|$C/run_shac_bcg.ini|$O run.seed=$sd;r_ad_s$sd|$C/run_shac.ini|$O run.seed=$sd"; done
# sweep 8 (two calls, the second with RESUME_TGZ, TRAIN_SECONDS=500 each): PPO on
# the regenerated run clip on the GPU; walk seeds 2-4 and run seed 1 at the
# configs' 1000 iterations; rung 0 (SHAC+BCG, 2000 iterations, 2 threads each)
# as configured and without the alive bonus (standing then earns 0.5 per step
# against about 3 at the commanded speed, DiffRL's ratio) with the joint-limit
# penalty at 10 and 100
D8="r_ppo|$C/run_ppo.ini|run.device=cuda run.threads=3"
for sd in 2 3 4; do D8="$D8;w_bcg_s$sd|$C/walk_shac_bcg.ini|run.checkpoint_every=100 run.seed=$sd"; done
D8="$D8;r_bcg_s1|$C/run_shac_bcg.ini|run.checkpoint_every=100 run.seed=1;r_ad_s1|$C/run_shac.ini|run.checkpoint_every=100 run.seed=1"
LO="run.iterations=2000 run.checkpoint_every=100 run.threads=2"
D8="$D8;l_bcg|$C/locomotion_shac_bcg.ini|$LO"
D8="$D8;l_bcg_a0_l10|$C/locomotion_shac_bcg.ini|$LO task.w_alive=0 task.w_limit=10"
D8="$D8;l_bcg_a0_l10_s1|$C/locomotion_shac_bcg.ini|$LO task.w_alive=0 task.w_limit=10 run.seed=1"
D8="$D8;l_bcg_a0_l100|$C/locomotion_shac_bcg.ini|$LO task.w_alive=0 task.w_limit=100"
# sweep 9 (TRAIN_SECONDS=500, SELECT_BEST=1): rung 2 on five more seeds at the
# 700 iterations of the CPU runs (2 threads each), rung 1 on seeds 2 and 3,
# rung 3 run on seeds 2 and 3 for SHAC+BCG and seed 2 and 3 for SHAC
D9=""
for sd in 2 3 5 6 7; do D9="$D9;w_bcg_s$sd|$C/walk_shac_bcg.ini|run.iterations=700 run.checkpoint_every=50 run.threads=2 run.seed=$sd"; done
for sd in 2 3; do D9="$D9;s_bcg_s$sd|$C/stand_shac_bcg.ini|run.iterations=350 run.checkpoint_every=50 run.seed=$sd"; done
for sd in 2 3; do D9="$D9;r_bcg_s$sd|$C/run_shac_bcg.ini|run.checkpoint_every=50 run.seed=$sd;r_ad_s$sd|$C/run_shac.ini|run.checkpoint_every=50 run.seed=$sd"; done
D9=${D9#;}
case "${SWEEP:-2}" in
  1) D=$D1 ;;
  2) D=$D2 ;;
  3) D=$D3 ;;
  4) D=$D4 ;;
  5) D=$D5 ;;
  6) D=$D6 ;;
  7) D=$D7 ;;
  8) D=$D8 ;;
  9) D=$D9 ;;
  *) echo "device_ladder: SWEEP must be 1 to 9" >&2; exit 2 ;;
esac
export RUNS=${LADDER_RUNS:-$D}
export TRAIN_SECONDS=$S THREADS_1=1 THREADS_2=1 EVAL_SECONDS=${EVAL_SECONDS:-10} EVAL_RUNS=${EVAL_RUNS:-3}
export THRESHOLDS=${THRESHOLDS:-"50 30 20 15 10 5"}
exec bash bench/device_train.sh
