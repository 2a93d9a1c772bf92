#!/bin/bash
# Entrypoint of the trainer's `node` container in a Flux runtime, written by
# the Flux plugin of kubectl-trainjob. The flux-installer init container left
# a Flux view and the broker configuration in /mnt/flux; this script finishes
# the setup. The first pod starts the Flux instance that runs the command
# given as this script's arguments; the other pods join it as followers.

fluxuser=$(whoami)
fluxuid=$(id -u "${fluxuser}")

viewbase=/mnt/flux
viewroot=${viewbase}/view
configroot=${viewbase}/config
viewbin=${viewroot}/bin

# Appended, so that software of the container (its Python, say) comes first.
export PATH=$PATH:${viewbin}

# The view links into /opt/software, which the installer copied beside it.
cp -R ${viewbase}/software/* /opt/software/

# Flux runs with the Python of its view.
foundroot=$(find ${viewroot} -maxdepth 2 -type d -path "${viewroot}/lib/python3*" 2>/dev/null)
pythonversion=${viewroot}/bin/$(basename "${foundroot}")
echo "Python version: ${pythonversion}"
echo "Python root: ${foundroot}"
if [[ -f "${pythonversion}" ]]; then
  rm -rf ${viewroot}/bin/python3 ${viewroot}/bin/python
  ln -s ${pythonversion} ${viewroot}/lib/python || true
  ln -s ${pythonversion} ${viewroot}/lib/python3 || true
fi
export PYTHONPATH=${PYTHONPATH:-""}:${foundroot}/site-packages
export FLUX_RC_EXTRA=${viewroot}/etc/flux/rc1.d

# Helpers for someone who execs into the pod.
cat > ${viewbase}/load-fluxion.sh <<EOT
flux module remove sched-simple
flux module load sched-fluxion-resource
flux module load sched-fluxion-qmanager
EOT
cat > ${viewbase}/flux-view.sh <<EOT
#!/bin/bash
export PATH=$PATH
export PYTHONPATH=$PYTHONPATH
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-""}:${viewroot}/lib
export fluxsocket=local://${configroot}/run/flux/local
EOT

cfg=${configroot}/etc/flux/config
command="$@"

# The broker reads its CURVE certificate only when no one else can.
curvepath=${configroot}/etc/curve/curve.cert
cp /curve/curve.cert ${curvepath}
chmod go-r ${curvepath}
chown -R ${fluxuid} ${curvepath}

# The resources of every host: cores and GPUs per node.
hosts=$(cat ${configroot}/etc/flux/system/hostlist)
flux R encode --hosts=${hosts} {{.Resources}} > ${configroot}/etc/flux/system/R

export STATE_DIR=${configroot}/var/lib/flux
export FLUX_OUTPUT_DIR=/tmp/fluxout
mkdir -p ${STATE_DIR} ${FLUX_OUTPUT_DIR} ${configroot}/etc/flux/system/cron.d

mainHost="{{.MainHost}}"
brokerOptions="-Scron.directory=${configroot}/etc/flux/system/cron.d \
  -Stbon.fanout=256 \
  -Srundir=${configroot}/run/flux \
  -Sstatedir=${STATE_DIR} -Slocal-uri=local://${configroot}/run/flux/local \
  -Slog-stderr-level=0 \
  -Slog-stderr-mode=local"

status=0
if [ "$(hostname)" = "${mainHost}" ]; then
  echo "Command provided is: ${command}"
  if [ -z "${command}" ]; then
    # No command: an interactive instance, until someone stops it.
    echo "flux broker --config-path ${cfg} ${brokerOptions}"
    flux broker --config-path ${cfg} ${brokerOptions}
    status=$?
  else
    flags="{{.Flags}}"
    echo "Flags for flux are ${flags}"
    echo "flux start -o --config ${cfg} ${brokerOptions} flux run ${flags} ${command}"
    flux start -o --config ${cfg} ${brokerOptions} flux run ${flags} ${command}
    status=$?
  fi
else
  # A follower retries until the leader's broker accepts it, and ends with
  # the instance.
  echo "flux start -o --config ${cfg} ${brokerOptions}"
  until flux start -o --config ${cfg} ${brokerOptions}; do
    echo "Return value for follower worker is $?"
    echo "Sleeping 15s to try again..."
    sleep 15
  done
  echo "The follower worker exited cleanly. Goodbye!"
fi

touch ${viewbase}/flux-operator-complete.txt
# The pod fails when the job does, so the TrainJob does too.
exit ${status}
