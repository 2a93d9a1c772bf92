package operator

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"go.uber.org/zap/zapcore"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// counted is a logged value that counts how often it is encoded.
type counted struct{ encoded *int }

func (c counted) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	*c.encoded++
	enc.AddString("id", "r-1")
	return nil
}

func TestLazyValues(t *testing.T) {
	var out bytes.Buffer
	logger := zap.New(zap.UseFlagOptions(&zap.Options{}), zap.WriteTo(&out), lazyValues())
	encoded := 0
	reconcile := logger.WithValues("controller", "trainjob").WithValues("reconcileID", counted{&encoded}).WithName("build")
	if encoded != 0 {
		t.Fatalf("the values were encoded %d times before a line was written", encoded)
	}
	reconcile.V(1).Info("not written at the default level")
	if encoded != 0 || out.Len() != 0 {
		t.Fatalf("a line below the level encoded the values %d times and wrote %q", encoded, out.String())
	}
	reconcile.Info("first", "n", 1)
	reconcile.Info("second", "n", 2)
	if encoded != 1 {
		t.Errorf("the values were encoded %d times for two lines, want once", encoded)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, got %q", out.String())
	}
	for i, line := range lines {
		var got map[string]any
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatalf("line %d %q: %v", i, line, err)
		}
		want := map[string]any{"controller": "trainjob", "reconcileID": map[string]any{"id": "r-1"}, "logger": "build", "n": float64(i + 1)}
		for k, v := range want {
			if b, _ := json.Marshal(got[k]); string(b) != mustJSON(t, v) {
				t.Errorf("line %d: %s = %s, want %s (line %s)", i, k, b, mustJSON(t, v), line)
			}
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
