package stack

import (
	"testing"

	"github.com/kubectl-trainjob/kubectl-trainjob/test/cluster"
)

// TestOperatorPortsBelowTheEphemeralRange: the operator's ports are picked before it starts and written into
// its configuration and the webhook configurations. A port from the kernel's ephemeral range can meanwhile
// become the local port of any process's outgoing connection, and the operator then exits at start; ports
// below the range are never handed out that way.
func TestOperatorPortsBelowTheEphemeralRange(t *testing.T) {
	first, err := cluster.EphemeralPortsFirst()
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		ports, err := freeOperatorPorts()
		if err != nil {
			t.Fatal(err)
		}
		for _, port := range []int{ports.webhook, ports.metrics, ports.health} {
			if port >= first {
				t.Fatalf("operator ports %+v: %d is in the ephemeral range, which starts at %d", ports, port, first)
			}
		}
		if ports.webhook == ports.metrics || ports.webhook == ports.health || ports.metrics == ports.health {
			t.Fatalf("operator ports %+v are not distinct", ports)
		}
	}
}
