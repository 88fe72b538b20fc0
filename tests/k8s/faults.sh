# tests/k8s/faults.sh: sourced by check_standin.sh once its kubectl
# checks are done (SERVER, K, TMP, kc, ok, notok, jqok, wait_for, pod_yaml
# are its).  The parts of the stand-in that clients of the API rely on
# and kubectl's commands do not show: bookmarks, watch timeouts, the fault
# injection endpoints, pods/resize (and its absence), a node going
# NotReady, an eviction, a PersistentVolumeClaim, restartPolicy Always,
# logs -f.
d="$TMP/x"
curl_s() { curl -s --max-time 10 "$@"; }
watch_url="$SERVER/api/v1/namespaces/default/pods?watch=true"

# Bookmarks and timeoutSeconds.
t0=$(date +%s)
out=$(curl_s -N "$watch_url&allowWatchBookmarks=true&timeoutSeconds=3")
t1=$(date +%s)
if jqok "$out" 'select(.type == "BOOKMARK") | .object.metadata.resourceVersion | test("^[0-9]+$")' &&
  [ $((t1 - t0)) -ge 2 ] && [ $((t1 - t0)) -le 6 ]; then
  ok "a watch with allowWatchBookmarks gets BOOKMARKs and ends at timeoutSeconds"
else
  notok "bookmarks: $((t1 - t0)) s, $(echo "$out" | grep -c BOOKMARK) bookmarks"
fi

# A cut ends every open watch cleanly; a cut mid-event leaves half an event.
# cut_watch OUT QUERY: a watch into OUT cut by POST .../cut?QUERY; rc its
# curl's exit.
cut_watch() {
  local cpid
  curl_s -N "$watch_url&resourceVersion=0" >"$1" 2>&1 &
  cpid=$!
  sleep 0.5
  curl_s -X POST "$SERVER/standin/watches/cut?$2" >/dev/null
  wait_for 3 sh -c "! kill -0 $cpid"
  wait "$cpid"
  rc=$?
}
cut_watch "$d/cut.out" ""
if [ "$rc" = 0 ] && jq -e -s 'length > 0' "$d/cut.out" >/dev/null 2>&1; then
  ok "POST /standin/watches/cut ends open watches with a whole stream"
else
  notok "cut: curl exit $rc, $(head -c 200 "$d/cut.out")"
fi
cut_watch "$d/mid.out" "mid=true"
if [ "$rc" != 0 ] && ! jq -e -s . "$d/mid.out" >/dev/null 2>&1; then
  ok "POST /standin/watches/cut?mid=true drops watches halfway through an event"
else
  notok "cut mid: curl exit $rc, last: $(tail -c 200 "$d/mid.out")"
fi

# The next watch expires on demand.
curl_s -X POST "$SERVER/standin/watches/expire?count=1" >/dev/null
out=$(curl_s -N "$watch_url&resourceVersion=0&timeoutSeconds=2")
out2=$(curl_s -N "$watch_url&resourceVersion=0&timeoutSeconds=1" | head -1)
if jqok "$out" '.type == "ERROR" and .object.code == 410 and .object.reason == "Expired"' &&
  jqok "$out2" '.type == "ADDED"'; then
  ok "POST /standin/watches/expire gives the next watch (only) 410 Expired"
else
  notok "expire: $out / $out2"
fi

# Delayed replies.
curl_s -X POST "$SERVER/standin/delay?ms=700" >/dev/null
t0=$(date +%s%N)
"${K[@]}" get nodes >/dev/null 2>&1
t1=$(date +%s%N)
curl_s -X POST "$SERVER/standin/delay?ms=0" >/dev/null
if [ $(((t1 - t0) / 1000000)) -ge 700 ]; then
  ok "POST /standin/delay slows every reply"
else
  notok "delay: get nodes took $(((t1 - t0) / 1000000)) ms"
fi

# restartPolicy Always: a failing container starts again, restartCount
# and lastState show the run before.
pod_yaml x-restart 'echo run; exit 3' | sed 's/restartPolicy: Never/restartPolicy: Always/' >"$d/restart.yaml"
"${K[@]}" apply -f "$d/restart.yaml" >/dev/null 2>&1
wait_for 10 sh -c "\"\${0}\" --server $SERVER get pod x-restart -o jsonpath='{.status.containerStatuses[0].restartCount}' | grep -qE '^[2-9]'" "$kc"
js=$("${K[@]}" get pod x-restart -o json)
if jqok "$js" '.status.containerStatuses[0].restartCount >= 2 and
    .status.containerStatuses[0].lastState.terminated.exitCode == 3 and
    .status.phase == "Running"'; then
  ok "restartPolicy Always starts a failed container again (restartCount, lastState)"
else
  notok "restart: $(echo "$js" | jq -c .status)"
fi
"${K[@]}" delete pod x-restart --grace-period=0 --force >/dev/null 2>&1

# logs -f follows the output until the container ends.
pod_yaml x-follow 'for i in 1 2 3 4 5; do echo line $i; sleep 0.3; done' >"$d/follow.yaml"
"${K[@]}" apply -f "$d/follow.yaml" >/dev/null 2>&1
wait_for 10 sh -c "\"\${0}\" --server $SERVER get pod x-follow | grep -q Running" "$kc"
out=$(timeout 15 "${K[@]}" logs -f x-follow 2>&1)
if [ "$(echo "$out" | tail -1)" = "line 5" ] && [ "$(echo "$out" | wc -l)" = 5 ]; then
  ok "logs -f follows the container's output to its end"
else
  notok "logs -f: $out"
fi

# pods/resize: the cgroup gets the new memory limit, the status shows it,
# generation moves; resources through the pod itself are refused.
if [ -n "$CGROUPS" ]; then
  pod_yaml x-resize 'sleep 300' '' '    resources: {limits: {memory: 64Mi}}' >"$d/resize.yaml"
  "${K[@]}" apply -f "$d/resize.yaml" >/dev/null 2>&1
  wait_for 10 sh -c "\"\${0}\" --server $SERVER get pod x-resize | grep -q Running" "$kc"
  pid=$("${K[@]}" get pod x-resize -o jsonpath='{.status.containerStatuses[0].containerID}')
  pid=${pid#standin://}
  cg=/sys/fs/cgroup/memory$(sed -n 's/^[0-9]*:memory:\(.*\)/\1/p' "/proc/$pid/cgroup" 2>/dev/null)
  patch='{"spec":{"containers":[{"name":"main","resources":{"limits":{"memory":"128Mi"},"requests":{"memory":"128Mi"}}}]}}'
  bad=$("${K[@]}" patch pod x-resize --type strategic -p "$patch" 2>&1)
  out=$(curl_s -X PATCH -H 'Content-Type: application/strategic-merge-patch+json' \
    --data "$patch" "$SERVER/api/v1/namespaces/default/pods/x-resize/resize")
  js=$("${K[@]}" get pod x-resize -o json)
  lim=$(cat "$cg/memory.limit_in_bytes" 2>/dev/null || cat "$cg/memory.max" 2>/dev/null)
  if echo "$bad" | grep -q 'Forbidden' && [ "$lim" = 134217728 ] &&
    jqok "$js" '.metadata.generation == 2 and
      .status.containerStatuses[0].resources.limits.memory == "128Mi" and
      .spec.containers[0].resources.limits.memory == "128Mi"'; then
    ok "pods/resize sets the cgroup's new memory limit and the status; a plain patch of resources is refused"
  else
    notok "resize: cgroup $cg limit $lim, patch said: $bad, resize said: $(echo "$out" | head -c 200)"
  fi
  "${K[@]}" delete pod x-resize --grace-period=0 --force >/dev/null 2>&1
else
  echo "SKIP: pods/resize: the stand-in has no memory cgroups here"
fi

# A node that goes NotReady: its running pods Failed, NodeLost, their
# processes gone; no new pod is placed there.
pod_yaml x-lost 'echo $$ > '"$d"'/lost.pid; sleep 300' '  nodeSelector: {kubernetes.io/hostname: node-1}' >"$d/lost.yaml"
"${K[@]}" apply -f "$d/lost.yaml" >/dev/null 2>&1
wait_for 10 test -s "$d/lost.pid"
curl_s -X POST "$SERVER/standin/nodes/node-1/notready" >/dev/null
wait_for 5 sh -c "\"\${0}\" --server $SERVER get pod x-lost -o jsonpath='{.status.phase}' | grep -q Failed" "$kc"
js=$("${K[@]}" get pod x-lost -o json)
if jqok "$js" '.status.phase == "Failed" and .status.reason == "NodeLost"' &&
  ! kill -0 "$(cat "$d/lost.pid")" 2>/dev/null &&
  "${K[@]}" get nodes | grep -qE '^node-1 +NotReady'; then
  ok "a node marked NotReady fails its pods (NodeLost) and kills their processes"
else
  notok "node NotReady: $(echo "$js" | jq -c .status) $("${K[@]}" get nodes 2>&1)"
fi
curl_s -X POST "$SERVER/standin/nodes/node-1/ready" >/dev/null

# An eviction (a kubelet under memory pressure): Failed, reason Evicted,
# DisruptionTarget, an Evicted event, the process gone.
pod_yaml x-evict 'echo $$ > '"$d"'/evict.pid; sleep 300' >"$d/evict.yaml"
"${K[@]}" apply -f "$d/evict.yaml" >/dev/null 2>&1
wait_for 10 test -s "$d/evict.pid"
curl_s -X POST "$SERVER/standin/pods/default/x-evict/evict" >/dev/null
js=$("${K[@]}" get pod x-evict -o json)
if jqok "$js" '.status.phase == "Failed" and .status.reason == "Evicted" and
    (.status.conditions[] | select(.type == "DisruptionTarget") | .status == "True")' &&
  ! kill -0 "$(cat "$d/evict.pid")" 2>/dev/null &&
  "${K[@]}" describe pod x-evict | grep -q 'Evicted'; then
  ok "POST /standin/pods/NS/NAME/evict evicts a pod (Failed, Evicted, DisruptionTarget, process gone)"
else
  notok "evict: $(echo "$js" | jq -c .status)"
fi

# A PersistentVolumeClaim: Bound; a pod mounting it writes through its
# mountPath (played by path rewriting), a second pod reads it back; a pod
# naming a missing claim stays Pending; the claim's folder goes with it.
printf 'apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: x-data}\nspec:\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 1Gi}}\n' >"$d/pvc.yaml"
"${K[@]}" apply -f "$d/pvc.yaml" >/dev/null 2>&1
vols='  volumes:
  - {name: data, persistentVolumeClaim: {claimName: x-data}}'
mnt='    volumeMounts:
    - {name: data, mountPath: /var/lib/x-data}
    env:
    - {name: DATA, value: /var/lib/x-data}'
pod_yaml x-write 'echo kept > $DATA/f' "$vols" "$mnt" >"$d/pw.yaml"
"${K[@]}" apply -f "$d/pw.yaml" >/dev/null 2>&1
wait_for 10 sh -c "\"\${0}\" --server $SERVER get pod x-write -o jsonpath='{.status.phase}' | grep -q Succeeded" "$kc"
pod_yaml x-read 'cat $DATA/f' "$vols" "$mnt" >"$d/pr.yaml"
"${K[@]}" apply -f "$d/pr.yaml" >/dev/null 2>&1
wait_for 10 sh -c "\"\${0}\" --server $SERVER get pod x-read -o jsonpath='{.status.phase}' | grep -q Succeeded" "$kc"
pod_yaml x-noclaim 'true' '  volumes:
  - {name: data, persistentVolumeClaim: {claimName: x-none}}' >"$d/pn.yaml"
"${K[@]}" apply -f "$d/pn.yaml" >/dev/null 2>&1
sleep 1.5
uid=$("${K[@]}" get pvc x-data -o jsonpath='{.metadata.uid}')
phase=$("${K[@]}" get pvc x-data -o jsonpath='{.status.phase}')
read_out=$("${K[@]}" logs x-read 2>&1)
pend=$("${K[@]}" get pod x-noclaim -o json)
had=$(test -f "$TMP/pods/volumes/$uid/f" && echo yes)
"${K[@]}" delete pod x-write x-read x-noclaim --grace-period=0 --force >/dev/null 2>&1
"${K[@]}" delete pvc x-data >/dev/null 2>&1
if [ "$phase" = Bound ] && [ "$read_out" = kept ] && [ "$had" = yes ] &&
  [ ! -e "$TMP/pods/volumes/$uid" ] &&
  jqok "$pend" '.status.phase == "Pending" and
    (.status.conditions[] | select(.type == "PodScheduled") | .message | test("persistentvolumeclaim \"x-none\" not found"))'; then
  ok "a PersistentVolumeClaim is Bound; what one pod writes at its mountPath the next reads; a missing claim keeps a pod Pending; the data goes with the claim"
else
  notok "pvc: phase $phase, read '$read_out', file $had, left $(ls "$TMP/pods/volumes" 2>&1), pending: $(echo "$pend" | jq -c .status)"
fi

# --no-resize: no pods/resize in discovery, a 404 for it.
"$STANDIN" --port-file "$TMP/port2" --dir "$TMP/pods2" --no-resize --no-cgroups \
  >"$TMP/standin2.log" 2>&1 &
PID2=$!
wait_for 10 test -s "$TMP/port2"
S2="http://127.0.0.1:$(cat "$TMP/port2")"
"$kc" --server "$S2" apply -f "$d/follow.yaml" >/dev/null 2>&1
code=$(curl_s -o /dev/null -w '%{http_code}' -X PATCH -H 'Content-Type: application/merge-patch+json' \
  --data '{}' "$S2/api/v1/namespaces/default/pods/x-follow/resize")
if [ "$code" = 404 ] && ! curl_s "$S2/api/v1" | grep -q 'pods/resize' &&
  curl_s "$SERVER/api/v1" | grep -q 'pods/resize'; then
  ok "--no-resize serves no pods/resize (404, absent from discovery)"
else
  notok "--no-resize: resize answered $code"
fi
kill -TERM "$PID2" 2>/dev/null
wait "$PID2" 2>/dev/null
