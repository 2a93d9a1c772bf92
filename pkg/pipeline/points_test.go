package pipeline

import "testing"

// TestExtensionPointsTable: every extension point of the phases has its row
// in the table, and the table has no row of a point no phase runs.
func TestExtensionPointsTable(t *testing.T) {
	all := points()
	for _, point := range all {
		ep, ok := extensionPoints[point]
		if !ok || ep.set == nil || ep.implements == nil || ep.add == nil {
			t.Errorf("extension point %s has no complete row in extensionPoints", point)
		}
	}
	if len(extensionPoints) != len(all) {
		t.Errorf("extensionPoints has %d rows, the phases have %d points", len(extensionPoints), len(all))
	}
}
