# shellcheck shell=bash
# bench/scaling_allreduce.sh - the all-reduce part of bench/scaling (sourced by it with --collective,
# --ddp or --mwms; docs/distributed.md "Collective all-reduce"). Uses bench/scaling's variables: BIN,
# ARGS, STEPS, WARM, WORK, OPT, SPARSE, MODEL, RANKS, BTL, AR, DDP, MWMS, REPEAT, PSS, PARAMS, DATA.
#
# For each N in RANKS, side by side (one after the other at the same N, so that the machine's load
# moves as little as possible between them):
#   loom_allreduce  examples/dist_job --strategy collective under mpirun -np N (MPI over TCP loopback:
#                   --mca btl $BTL, default self,tcp, so that every byte crosses lo and is counted)
#   ddp             bench/peers/torch_ddp_mlp.py --nproc N (PyTorch DDP, Gloo on CPU, TCP loopback)
#   mwms            bench/peers/tf_mwms_mlp.py --nproc N (TF 2.15 Keras MultiWorkerMirroredStrategy,
#                   gRPC ring all-reduce on loopback)
# each with batch 128 per worker, one thread per process, the same optimizer (--sgd: SGD 0.05;
# otherwise Adagrad 0.05, initial accumulator 0.1, the loom MLP's and TF DNNClassifier's default), the
# first WARM steps untimed. Key=value lines, <side> one of the three:
#   <side>_n<N>_global_steps_per_sec  synchronous steps/s (each step N x 128 examples)
#   <side>_n<N>_efficiency            E(N) = steps/s(N) / steps/s(1) of the same side
#   <side>_n<N>_processes             N worker processes on `cores` cores (oversubscribed when N > cores;
#                                     the other sessions' load is machine_load_1min)
#   <side>_n<N>_bytes_per_step_per_worker  bytes sent on lo during the run / steps / N (start-up and the
#                                     end included); each job runs in its own network namespace
#                                     (allreduce_bytes_counted_on=own_netns), so only its own bytes count
#   <side>_n<N>_bytes_vs_ring         that / (2(N-1)/N x dense gradient bytes + (N-1)/N x the sparse bytes
#                                     gathered): 1 is a bandwidth-optimal ring all-reduce (and allgather)
#   loom_allreduce_n<N>_run_ms / _comm_ms / _apply_ms   rank 0's forward+backward, all-reduce, apply per step
#   loom_allreduce_n<N>_overlap_fraction  the all-reduce time hidden behind the backward pass (when the
#                                     strategy prints overlap_fraction=)
#   <side>_n<N>_examples_per_sec      global_steps_per_sec x N x 128
#   n<N>_loom_allreduce_vs_ddp, n<N>_loom_allreduce_vs_mwms   global steps/s ratios (the same examples per step)
#   n<N>_loom_allreduce_vs_ps_examples_per_sec   against the PS strategy with N trainers (its global step is one
#                                     trainer's batch of 128: examples per second are compared)
# With --repeat R the sides take R rounds in turn at each N and each figure is the median round's
# (<side>_n<N>_rounds lists every round's steps/s). Then the E(N) model (allreduce_model below).
#
# Through a shaped network (bench/scaling --net "RTT:GBIT ...", ar_runs RTT:GBIT): the same keys with
# the prefix net<RTT>ms_<GBIT>gbit_, each job under bench/netjob --collective: every rank in its own
# network namespace with its own address, its link rate-limited by tbf (GBIT each way), every
# rank-to-rank connection through the delay proxy (RTT/2 each way), the PS runs' shaping.
#   loom_allreduce  dist_job --strategy collective launched by TF_CONFIG alone: the Gloo transport
#   ddp             torch_ddp_mlp.py --tf_config, one process per namespace (Gloo, TCP store at rank 0)
#   mwms            tf_mwms_mlp.py --tf_config, one process per namespace, every task at port 2222 of its
#                   own address (netjob --task-port 2222: gRPC needs fixed ports)
# bytes_per_step_per_worker is then every byte through the proxy (between ranks, both directions,
# start-up included) / steps / N. allreduce_net_model checks the model on these points with the
# shape's own RTT and bandwidth (no calibration).

lo_tx() { awk '$1 == "lo:" { print $10 }' /proc/net/dev; }

# Each side's job runs in a network namespace of its own (unshare -n, root): its loopback carries only
# that job's bytes (the machine's other sessions use loopback too). Without it (no root, no unshare),
# the shared loopback is counted and ALLREDUCE_BYTES says so.
# Open MPI leaves lo out of its TCP interfaces unless told: in the namespace lo is the only one.
MPI_NS_ARGS=()
if unshare -n sh -c 'ip link set lo up' 2>/dev/null; then
  ALLREDUCE_BYTES=own_netns; MPI_NS_ARGS=(--mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
else
  ALLREDUCE_BYTES=shared_lo
fi
# in_ns BYTESFILE CMD... -> runs CMD (in its own namespace when it can), the lo bytes sent into BYTESFILE
in_ns() {
  local f=$1; shift
  if [ "$ALLREDUCE_BYTES" = own_netns ]; then
    unshare -n bash -c 'ip link set lo up || exit 97; f=$1; shift; "$@"; rc=$?
      awk '"'"'$1 == "lo:" { print $10 }'"'"' /proc/net/dev >"$f"; exit $rc' _ "$f" "$@"
  else
    local b0 rc; b0=$(lo_tx); "$@"; rc=$?; echo $(( $(lo_tx) - b0 )) >"$f"; return $rc
  fi
}

# ar_net_job N LOG TASK_PORT CMD... -> CMD as an N-rank job under bench/netjob --collective with the
# shape ARTT / AGB (the workers' TF_CONFIG port TASK_PORT); LOG gets netjob's output then rank 0's,
# LOG.bytes the bytes through the proxy
ar_net_job() {
  local n=$1 log=$2 port=$3 rc; shift 3
  rm -rf "$WORK/ar_netjob"
  LOOM_QUIET=1 timeout 600 bench/netjob --collective --task-port "$port" -p 0 -w $((n - 1)) --rtt "$ARTT" --gbit "$AGB" \
    -d "$WORK/ar_netjob" -- "$@" >"$log" 2>&1
  rc=$?
  cat "$WORK/ar_netjob/logs/chief-0.log" >>"$log" 2>/dev/null
  grep -o 'netjob_bytes_proxied=[0-9]*' "$log" | tail -1 | cut -d= -f2 >"$log.bytes"
  return $rc
}

# ar_side SIDE N LOG -> runs one side at N (through the shape ARTT / AGB when ANP is set); sets SG
# (steps/s, empty on failure) and SB (bytes per step per worker); its output in LOG
ar_side() {
  local side=$1 n=$2 log=$3 rc
  SG=""; SB=""
  if [ -n "$ANP" ]; then
    case $side in
      loom_allreduce) ar_net_job "$n" "$log" 0 "$BIN" --strategy collective "${ARGS[@]}" --warmup "$WARM" ;;
      ddp) ar_net_job "$n" "$log" 0 "$TORCH_PY" bench/peers/torch_ddp_mlp.py --tf_config --steps "$((STEPS - WARM))" \
             --warmup "$WARM" --opt "$PEER_OPT" --lr 0.05 --batch 128 --threads 1 --data "$DATA" ;;
      mwms) ar_net_job "$n" "$log" 2222 "$TF_PY" bench/peers/tf_mwms_mlp.py --tf_config --steps "$((STEPS - WARM))" \
             --warmup "$WARM" --opt "$PEER_OPT" --lr 0.05 --batch 128 --threads 1 --data "$DATA" ;;
    esac
    rc=$?
  fi
  [ -n "$ANP" ] || case $side in
    loom_allreduce)
      rm -rf "$WORK/ar_model"
      in_ns "$log.bytes" env -u TF_CONFIG LOOM_QUIET=1 timeout 600 mpirun --allow-run-as-root --oversubscribe --bind-to none \
        --mca btl "$BTL" "${MPI_NS_ARGS[@]}" -np "$n" "$BIN" --strategy collective --model_dir "$WORK/ar_model" "${ARGS[@]}" --warmup "$WARM" >"$log" 2>&1
      rc=$? ;;
    ddp)
      in_ns "$log.bytes" timeout 600 "$TORCH_PY" bench/peers/torch_ddp_mlp.py --nproc "$n" \
        --steps "$((STEPS - WARM))" --warmup "$WARM" --opt "$PEER_OPT" --lr 0.05 --batch 128 --threads 1 --data "$DATA" >"$log" 2>&1
      rc=$? ;;
    mwms)
      in_ns "$log.bytes" timeout 600 "$TF_PY" bench/peers/tf_mwms_mlp.py --nproc "$n" \
        --steps "$((STEPS - WARM))" --warmup "$WARM" --opt "$PEER_OPT" --lr 0.05 --batch 128 --threads 1 --data "$DATA" >"$log" 2>&1
      rc=$? ;;
  esac
  if [ "$side" = loom_allreduce ]; then
    SG=$(grep -m1 -o 'global_steps_per_sec=[0-9.]*' "$log" | cut -d= -f2)
  else
    grep -q '^skipped=1' "$log" && { echo "${ANP}${side}_n${n}_skipped=$(grep -m1 '^reason=' "$log" | cut -d= -f2-)"; return; }
    SG=$(grep -m1 -o '^global_steps_per_sec=[0-9.]*' "$log" | cut -d= -f2)
  fi
  if [ $rc -ne 0 ] || [ -z "$SG" ]; then
    SG=""; echo "${ANP}${side}_n${n}_error=exit_$rc"; tail -3 "$log" | sed "s/^/${ANP}${side}_n${n}: /" >&2; return
  fi
  # every byte on lo during the run over every step the job made (STEPS on every side, warm-up
  # included), per worker
  SB=$(awk -v d="$(cat "$log.bytes" 2>/dev/null || echo 0)" -v s="$STEPS" -v n="$n" 'BEGIN { printf "%.0f", d / s / n }')
}

# ar_runs [NET] -> every side at every N of RANKS; NET "lo" (the default) or RTT:GBIT, a shaped network
# (keys and the WORK files then carry the prefix net<RTT>ms_<GBIT>gbit_)
ar_runs() {
  local n side g o k grad line r runs med log net=${1:-lo}
  ANP=""; ARTT=""; AGB=""
  if [ "$net" != lo ]; then ARTT=${net%%:*}; AGB=${net##*:}; ANP="net${ARTT}ms_${AGB}gbit_"; fi
  PEER_OPT=adagrad; [ "$OPT" = sgd ] && PEER_OPT=sgd
  local SIDES=""
  [ "$AR" = 1 ] && SIDES+=" loom_allreduce"
  if [ "$SPARSE" = 1 ]; then
    { [ "$DDP" = 1 ] || [ "$MWMS" = 1 ]; } && echo "peers_skipped=the DDP and MWMS peers train only the Fashion-MNIST MLP"
  else
    # the peers' virtualenvs (scripts/peer_venv.sh torch / tf; TORCH_PY / TF_PY name other pythons)
    TORCH_PY=${TORCH_PY:-$HOME/.cache/loom/venv/torch/bin/python}; TF_PY=${TF_PY:-$HOME/.cache/loom/venv/tf/bin/python}
    if [ "$DDP" = 1 ]; then
      if [ -x "$TORCH_PY" ]; then SIDES+=" ddp"; else echo "ddp_skipped=no $TORCH_PY (bash scripts/peer_venv.sh torch makes it)"; fi
    fi
    if [ "$MWMS" = 1 ]; then
      if [ -x "$TF_PY" ]; then SIDES+=" mwms"; else echo "mwms_skipped=no $TF_PY (bash scripts/peer_venv.sh tf makes it)"; fi
    fi
  fi
  if [ -n "$ANP" ]; then
    echo "${ANP}allreduce_sides=${SIDES# } ${ANP}allreduce_transport=gloo_tf_config warmup_steps=$WARM peer_optimizer=$PEER_OPT repeats=$REPEAT ${ANP}allreduce_bytes_counted_on=delay_proxy"
  else
    echo "allreduce_sides=${SIDES# } allreduce_btl=$BTL warmup_steps=$WARM peer_optimizer=$PEER_OPT repeats=$REPEAT allreduce_bytes_counted_on=$ALLREDUCE_BYTES"
  fi
  for n in $RANKS; do
    echo "${ANP}n${n}_machine_load_1min=$(cut -d' ' -f1 /proc/loadavg) ${ANP}n${n}_cores=$(nproc) ${ANP}n${n}_processes_per_side=$n"
    # the sides in turn, REPEAT rounds: each side's figure is the median of its rounds
    for r in $(seq "$REPEAT"); do
      for side in $SIDES; do
        ar_side "$side" "$n" "$WORK/${ANP}${side}_n${n}_r$r.log"
        [ -n "$SG" ] && echo "$side $n $r $SG $SB" >>"$WORK/${ANP}arruns"
      done
    done
    for side in $SIDES; do
      runs=$(awk -v s="$side" -v n="$n" '$1 == s && $2 == n { print $3, $4, $5 }' "$WORK/${ANP}arruns" 2>/dev/null | sort -k2 -g)
      [ -n "$runs" ] || continue
      # the median round (the lower middle one of an even count)
      med=$(echo "$runs" | awk '{ l[NR] = $0 } END { print l[int((NR + 1) / 2)] }')
      set -- $med; r=$1; SG=$2; SB=$3; log="$WORK/${ANP}${side}_n${n}_r$r.log"
      k="${ANP}${side}_n${n}"
      echo "${k}_global_steps_per_sec=$SG ${k}_examples_per_sec=$(awk -v g="$SG" -v n="$n" 'BEGIN { printf "%.0f", g * n * 128 }') ${k}_processes=$n ${k}_oversubscribed=$([ "$n" -gt "$(nproc)" ] && echo 1 || echo 0)"
      [ "$REPEAT" -gt 1 ] && echo "${k}_rounds=$(echo "$runs" | sort -n | awk '{ printf "%s%s", (NR > 1) ? "," : "", $2 }')"
      echo "$side $n $SG" >>"$WORK/${ANP}arpoints"
      o=$(awk -v s="$side" '$1 == s && $2 == 1 { print $3 }' "$WORK/${ANP}arpoints")
      [ -n "$o" ] && echo "${k}_efficiency=$(awk -v g="$SG" -v o="$o" 'BEGIN { printf "%.3f", g / o }')"
      if [ "$side" = loom_allreduce ]; then
        line=$(grep -m1 '^collective: rank=0 ' "$log")
        kvl() { echo "$line" | grep -o " $1=[0-9.]*" | head -1 | cut -d= -f2; }
        grad=$(( $(kvl allreduce_bytes_per_step) + 0 ))
        local gat ov wall; gat=$(( $(kvl allgather_bytes_per_step) + 0 )); ov=$(kvl overlap_fraction)
        wall=$(kvl allreduce_wall_ms)
        echo "${k}_run_ms=$(kvl run_ms) ${k}_comm_ms=$(kvl comm_ms) ${k}_apply_ms=$(kvl apply_ms)"
        echo "${k}_gradient_bytes=$grad ${k}_allgather_bytes_per_step=$gat"
        # a strategy that overlaps the all-reduce with the backward pass prints its whole wall time and
        # the hidden part (comm_ms is then the part the step waited for)
        [ -n "$wall" ] && echo "${k}_allreduce_wall_ms=$wall ${k}_buckets=$(kvl buckets)"
        [ -n "$ov" ] && echo "${k}_overlap_fraction=$ov"
        echo "$n $(kvl run_ms) $(kvl comm_ms) $(kvl apply_ms) $SG ${ov:-0} $grad $gat ${wall:-$(kvl comm_ms)}" >>"$WORK/${ANP}ar_measured"
      else
        grad=$(grep -m1 -o '^gradient_bytes=[0-9]*' "$log" | cut -d= -f2); gat=0
      fi
      echo "${k}_bytes_per_step_per_worker=$SB"
      # the bound: a ring all-reduce of the dense gradients, 2(N-1)/N x their bytes, and a ring allgather
      # of the sparse rows and ids, (N-1)/N x the bytes gathered (every rank's)
      [ "$n" -gt 1 ] && [ "${grad:-0}" -gt 0 ] &&
        echo "${k}_bytes_vs_ring=$(awk -v b="$SB" -v g="$grad" -v a="${gat:-0}" -v n="$n" 'BEGIN { printf "%.3f", b / (2 * (n - 1) / n * g + (n - 1) / n * a) }')"
    done
    g=$(awk -v n="$n" '$1 == "loom_allreduce" && $2 == n { print $3 }' "$WORK/${ANP}arpoints" 2>/dev/null)
    if [ -n "$g" ]; then
      for side in ddp mwms; do
        o=$(awk -v s="$side" -v n="$n" '$1 == s && $2 == n { print $3 }' "$WORK/${ANP}arpoints")
        [ -n "$o" ] && echo "${ANP}n${n}_loom_allreduce_vs_${side}=$(awk -v a="$g" -v b="$o" 'BEGIN { printf "%.2f", a / b }')"
      done
      # the PS strategy's global step is one trainer's batch, the all-reduce's N ranks' batches: compare
      # examples per second (the PS job of the same shape: bench/scaling's points / netpoints)
      if [ -n "$ANP" ]; then
        o=$(awk -v t="$net" -v p="${PSS%% *}" -v n="$n" '$1 == t && $2 == p && $3 == n { print $4 }' "$WORK/netpoints" 2>/dev/null)
      else
        o=$(awk -v p="${PSS%% *}" -v n="$n" '$1 == p && $2 == n { print $3 }' "$WORK/points" 2>/dev/null)
      fi
      [ -n "$o" ] && echo "${ANP}n${n}_loom_allreduce_vs_ps_examples_per_sec=$(awk -v a="$g" -v b="$o" -v n="$n" 'BEGIN { printf "%.2f", a * n / b }')"
    fi
  done
}

# ---- the E(N) model of synchronous all-reduce training ----
# A step: t_c (forward + backward + apply, measured at N = 1) then the all-reduce of B gradient bytes,
# of which a fraction f is hidden behind the backward pass:
#   ring (bandwidth-optimal):   t_ar = 2(N-1)/N x B / bw + 2(N-1) x lat
#   tree (recursive doubling):  t_ar = 2 log2(N) x (lat + B / bw)
#   T(N) = (t_c + (1 - f) t_ar) x max(1, N / C)   (C cores: each rank keeps a core busy, computing or
#                                                  polling MPI; more ranks than cores stretch every step)
#   X(N) = 1 / T(N),  E(N) = X(N) / X(1)
# lat = one-way latency (half the TCP round trip measured on lo), bw = the all-reduce's bus bandwidth
# on lo, calibrated on the measured N = 2 point (bw = B / (t_ar(2) - 2 lat), t_ar(2) the all-reduce's
# whole wall time: allreduce_wall_ms when the strategy prints it, else comm_ms); the other measured
# points check it. Then both strategies on the two network shapes of the PS model, N up to 256 (spare
# cores, the PS model's lines above for the PS: model_p<P>_rtt...).
tcp_rtt_ms() { # median of 200 TCP round trips of 1 byte on lo (python3)
  python3 - <<'PYEOF'
import socket, threading, time
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
def echo():
    c, _ = srv.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while True:
        b = c.recv(1)
        if not b: break
        c.sendall(b)
threading.Thread(target=echo, daemon=True).start()
s = socket.create_connection(srv.getsockname()); s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
t = []
for _ in range(200):
    t0 = time.perf_counter(); s.sendall(b"x"); s.recv(1); t.append(time.perf_counter() - t0)
t.sort(); print("%.4f" % (t[len(t) // 2] * 1e3))
PYEOF
}

allreduce_model() {
  [ -s "$WORK/ar_measured" ] || return 0
  local run apply grad rtt c2 bw
  read -r run apply < <(awk '$1 == 1 { print $2, $4 }' "$WORK/ar_measured")
  [ -n "$run" ] || { echo "model_allreduce=none (no N=1 run: the compute time is measured there)"; return 0; }
  # the dense gradient bytes all-reduced per step (counted by the strategy at N > 1; else 4 x parameters)
  grad=$(awk '$1 > 1 && $7 > 0 { print $7; exit }' "$WORK/ar_measured")
  if awk '$8 > 0 { f = 1 } END { exit !f }' "$WORK/ar_measured"; then
    echo "model_allreduce=none (the model's sparse gradients are gathered, several small collectives a step; the model covers a dense all-reduce)"
    return 0
  fi
  [ -n "$grad" ] || grad=$((PARAMS * 4))
  rtt=$(tcp_rtt_ms)
  echo "model_allreduce_compute_ms=$(awk -v a="$run" -v b="$apply" 'BEGIN { printf "%.3f", a + b }') model_allreduce_gradient_bytes=$grad model_lo_tcp_rtt_ms=$rtt"
  # the N=2 all-reduce's whole wall time (allreduce_wall_ms when printed, else comm_ms: no overlap)
  c2=$(awk '$1 == 2 { print $9 }' "$WORK/ar_measured")
  if [ -z "$c2" ] || [ "${grad:-0}" -le 0 ]; then
    echo "model_allreduce_loopback=none (no N=2 run to calibrate the bandwidth on)"
  else
    bw=$(awk -v c="$c2" -v r="$rtt" -v b="$grad" 'BEGIN { t = c - r; if (t <= 0) t = c; printf "%.0f", b / (t / 1000) }')
    echo "model_allreduce_lo_bus_bytes_per_sec=$bw (calibrated at N=2)"
    while read -r n _ comm _ meas ov _ _ _; do
      awk -v n="$n" -v tc="$(awk -v a="$run" -v b="$apply" 'BEGIN { print a + b }')" -v lat="$(awk -v r="$rtt" 'BEGIN { print r / 2 }')" \
        -v bw="$bw" -v b="$grad" -v c="$(nproc)" -v f="$ov" -v m="$meas" -v cm="$comm" 'BEGIN {
        ring = (n > 1) ? (2 * (n - 1) / n * b / bw * 1000 + 2 * (n - 1) * lat) : 0;
        tree = (n > 1) ? (2 * log(n) / log(2) * (lat + b / bw * 1000)) : 0;
        s = (n > c) ? n / c : 1;
        pr = 1000 / ((tc + (1 - f) * ring) * s); pt = 1000 / ((tc + (1 - f) * tree) * s);
        printf "model_allreduce_n%d_ring_predicted_steps_per_sec=%.1f tree_predicted=%.1f measured=%.1f ratio_measured_to_ring=%.2f", n, pr, pt, m, m / pr;
        printf " ring_predicted_comm_ms=%.2f measured_comm_ms=%s\n", (1 - f) * ring * s, cm }'
    done <"$WORK/ar_measured"
  fi
  # both all-reduce algorithms over the PS model's network shapes, spare cores, N up to 256
  local NET
  for NET in "0.2 10" "1 1"; do
    set -- $NET
    awk -v tc="$(awk -v a="$run" -v b="$apply" 'BEGIN { print a + b }')" -v rtt="$1" -v gbit="$2" -v b="$grad" 'BEGIN {
      bw = gbit * 1e9 / 8; lat = rtt / 2; lr = ""; lt = "";
      for (n = 1; n <= 256; n *= 2) {
        ring = (n > 1) ? 2 * (n - 1) / n * b / bw * 1000 + 2 * (n - 1) * lat : 0;
        tree = (n > 1) ? 2 * log(n) / log(2) * (lat + b / bw * 1000) : 0;
        lr = lr sprintf(" E(%d)=%.2f", n, tc / (tc + ring)); lt = lt sprintf(" E(%d)=%.2f", n, tc / (tc + tree)) }
      printf "model_allreduce_ring_rtt%gms_%ggbit:%s\n", rtt, gbit, lr;
      printf "model_allreduce_tree_rtt%gms_%ggbit:%s\n", rtt, gbit, lt }'
  done
}

# ---- the model on the shaped points (ar_runs RTT:GBIT), from the shape and N = 1 alone ----
# allreduce_net_model RTT:GBIT: t_c is the shape's N = 1 run (run_ms + apply_ms: no traffic), B the
# gradient bytes the strategy counted, lat = RTT / 2 (the proxy's delay each way), bw = GBIT / 8 bytes
# per second (each rank's own link, each direction: a ring step sends on one link and receives on
# another, all links at once); nothing is calibrated on the shaped points. Beside each measured point:
#   model_<prefix>allreduce_n<N>_ring_predicted_steps_per_sec  1 / T(N), T(N) = max(t_c + (1 - f) t_ar, t_ar)
#       x max(1, N / C) with t_ar the ring's, f the point's measured overlap fraction (a step is never
#       shorter than its own all-reduce: hiding it behind the backward pass saves at most t_c);
#       tree_predicted the same with the tree's t_ar;
#       no_overlap_ring_predicted with f = 0; measured; ratio_measured_to_ring; predicted/measured
#       efficiency; ring_predicted_allreduce_ms (t_ar,ring) against measured_allreduce_wall_ms (the
#       strategy's whole all-reduce time per step, hidden part included): the network part alone
# then both algorithms on this shape with spare cores, N up to 256 (model_<prefix>allreduce_{ring,tree}: E(N)=...).
allreduce_net_model() {
  local net=$1 rtt gb np f run apply grad tc
  rtt=${net%%:*}; gb=${net##*:}; np="net${rtt}ms_${gb}gbit_"; f="$WORK/${np}ar_measured"
  [ -s "$f" ] || return 0
  read -r run apply < <(awk '$1 == 1 { print $2, $4 }' "$f")
  [ -n "$run" ] || { echo "model_${np}allreduce=none (no N=1 run: the compute time is measured there)"; return 0; }
  grad=$(awk '$1 > 1 && $7 > 0 { print $7; exit }' "$f")
  if awk '$8 > 0 { g = 1 } END { exit !g }' "$f"; then
    echo "model_${np}allreduce=none (the model's sparse gradients are gathered; the model covers a dense all-reduce)"
    return 0
  fi
  [ -n "$grad" ] || grad=$((PARAMS * 4))
  tc=$(awk -v a="$run" -v b="$apply" 'BEGIN { printf "%.3f", a + b }')
  echo "model_${np}allreduce_compute_ms=$tc model_${np}allreduce_gradient_bytes=$grad model_${np}allreduce_lat_ms=$(awk -v r="$rtt" 'BEGIN { print r / 2 }') model_${np}allreduce_link_bytes_per_sec=$(awk -v g="$gb" 'BEGIN { printf "%.0f", g * 1e9 / 8 }')"
  local x1; x1=$(awk '$1 == 1 { print $5 }' "$f")
  while read -r n _ _ _ meas ov _ _ wall; do
    awk -v p="$np" -v n="$n" -v tc="$tc" -v lat="$(awk -v r="$rtt" 'BEGIN { print r / 2 }')" -v bw="$(awk -v g="$gb" 'BEGIN { print g * 1e9 / 8 }')" \
      -v b="$grad" -v c="$(nproc)" -v f="$ov" -v m="$meas" -v x1="$x1" -v w="$wall" 'BEGIN {
      ring = (n > 1) ? (2 * (n - 1) / n * b / bw * 1000 + 2 * (n - 1) * lat) : 0;
      tree = (n > 1) ? (2 * log(n) / log(2) * (lat + b / bw * 1000)) : 0;
      s = (n > c) ? n / c : 1;
      tr = tc + (1 - f) * ring; if (tr < ring) tr = ring; tt = tc + (1 - f) * tree; if (tt < tree) tt = tree;
      pr = 1000 / (tr * s); pt = 1000 / (tt * s); p0 = 1000 / ((tc + ring) * s);
      p1 = 1000 / tc;
      printf "model_%sallreduce_n%d_ring_predicted_steps_per_sec=%.1f tree_predicted=%.1f no_overlap_ring_predicted=%.1f measured=%.1f ratio_measured_to_ring=%.2f", p, n, pr, pt, p0, m, m / pr;
      printf " predicted_efficiency=%.3f measured_efficiency=%.3f ring_predicted_allreduce_ms=%.2f measured_allreduce_wall_ms=%s overlap_fraction=%s\n", pr / p1, (x1 > 0) ? m / x1 : 0, ring, w, f }'
  done <"$f"
  awk -v p="$np" -v tc="$tc" -v rtt="$rtt" -v gbit="$gb" -v b="$grad" 'BEGIN {
    bw = gbit * 1e9 / 8; lat = rtt / 2; lr = ""; lt = "";
    for (n = 1; n <= 256; n *= 2) {
      ring = (n > 1) ? 2 * (n - 1) / n * b / bw * 1000 + 2 * (n - 1) * lat : 0;
      tree = (n > 1) ? 2 * log(n) / log(2) * (lat + b / bw * 1000) : 0;
      lr = lr sprintf(" E(%d)=%.2f", n, tc / (tc + ring)); lt = lt sprintf(" E(%d)=%.2f", n, tc / (tc + tree)) }
    printf "model_%sallreduce_ring:%s\n", p, lr;
    printf "model_%sallreduce_tree:%s\n", p, lt }'
}
