#!/bin/bash
# Setup run by the flux-installer init container (a Flux view image) of every
# `node` pod of a Flux runtime, written by the Flux plugin of kubectl-trainjob:
# it writes the hostlist and the broker configuration, and copies the Flux
# view into the volume it shares with the trainer's container.

fluxroot=/opt/view
installRoot=/mnt/flux/config
viewroot=/mnt/flux
echo "Hello I am hostname $(hostname) running setup."
echo "Flux install root: ${fluxroot}"
export fluxroot
export PATH=${fluxroot}/bin:$PATH

mkdir -p ${fluxroot}/bin
mkdir -p ${installRoot}/etc/flux/system/cron.d ${installRoot}/var/lib/flux ${installRoot}/etc/flux/config
mkdir -p ${installRoot}/run/flux ${installRoot}/etc/curve ${viewroot}/view

echo "alpha-node-0-[0-3]" > ${installRoot}/etc/flux/system/hostlist

cat > ${installRoot}/etc/flux/config/broker.toml <<'EOT'
[access]
allow-guest-user = true
allow-root-owner = true

# The resources of the instance, written by the entrypoint with flux-R(1).
[resource]
path = "/mnt/flux/config/etc/flux/system/R"

[bootstrap]
curve_cert = "/mnt/flux/config/etc/curve/curve.cert"
default_port = 8050
default_bind = "tcp://ib0:%p"
default_connect = "tcp://%h.hpc.default.svc.cluster.local:%p"
hosts = [
{ host="alpha-node-0-[0-3]"},
]

[archive]
dbpath = "/mnt/flux/config/var/lib/flux/job-archive.sqlite"
period = "1m"
busytimeout = "50s"

[sched-fluxion-qmanager]
queue-policy = "easy"
EOT
echo
echo "Broker Configuration"
cat ${installRoot}/etc/flux/config/broker.toml

# /opt/view links to the one view under /opt/views/._view, which links into
# /opt/software: both are copied, and the entrypoint puts /opt/software back.
echo "Moving content from /opt/view to be in shared volume at ${viewroot}"
view=/opt/views/._view/$(ls /opt/views/._view/)
cp -R ${view}/* ${viewroot}/view
cp -R /opt/software ${viewroot}/

# Marks the copy as complete.
touch ${viewroot}/flux-operator-done.txt
echo "Application is done."
