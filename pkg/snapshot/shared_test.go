package snapshot

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// snapshotOf is a snapshot ConfigMap of TrainJob name, with its own copy of content.
func snapshotOf(name, content string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name + Suffix, Labels: map[string]string{"trainer.kubeflow.org/trainjob-name": name},
			Annotations: map[string]string{"trainer.kubeflow.org/applied-hash": "0123"}},
		Data: map[string]string{Key: strings.Clone(content)},
	}
}

func sameBytes(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

// TestSharedContents: snapshots with the same content end up with one copy of it, those with another content
// keep theirs, snapshots lose their labels and annotations (nobody reads them there), other ConfigMaps are left
// alone, and at most VersionCacheSize contents are kept.
func TestSharedContents(t *testing.T) {
	var s SharedContents
	a1, a2, b := snapshotOf("a1", "kind: ClusterTrainingRuntime"), snapshotOf("a2", "kind: ClusterTrainingRuntime"), snapshotOf("b", "kind: TrainingRuntime")
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hostfile", Labels: map[string]string{"trainer.kubeflow.org/trainjob-name": "a1"}},
		Data: map[string]string{Key: "kind: ClusterTrainingRuntime"}}
	otherData := other.Data[Key]
	for _, cm := range []*corev1.ConfigMap{a1, a2, b, other} {
		s.Share(cm)
	}
	if !sameBytes(a1.Data[Key], a2.Data[Key]) || reflect.ValueOf(a1.Data).UnsafePointer() != reflect.ValueOf(a2.Data).UnsafePointer() {
		t.Error("two snapshots of the same content keep a copy each")
	}
	edited := snapshotOf("a3", "kind: ClusterTrainingRuntime")
	edited.Data["extra"] = "someone's"
	s.Share(edited)
	if !sameBytes(edited.Data[Key], a1.Data[Key]) || edited.Data["extra"] != "someone's" || len(a1.Data) != 1 {
		t.Errorf("a snapshot with another key: %v, shared %v", edited.Data, a1.Data)
	}
	if a1.Data[Key] != "kind: ClusterTrainingRuntime" || b.Data[Key] != "kind: TrainingRuntime" {
		t.Errorf("contents changed: %q, %q", a1.Data[Key], b.Data[Key])
	}
	if sameBytes(a1.Data[Key], b.Data[Key]) {
		t.Error("snapshots of different contents share one")
	}
	for _, cm := range []*corev1.ConfigMap{a1, a2, b} {
		if cm.Labels != nil || cm.Annotations != nil {
			t.Errorf("snapshot %s keeps labels %v and annotations %v", cm.Name, cm.Labels, cm.Annotations)
		}
	}
	if !sameBytes(other.Data[Key], otherData) || len(other.Labels) != 1 {
		t.Errorf("a ConfigMap that is not a snapshot was changed: %v", other)
	}
	for i := range 2 * VersionCacheSize {
		s.Share(snapshotOf(fmt.Sprint(i), fmt.Sprint("content ", i)))
	}
	if n := s.contents.Len(); n > VersionCacheSize {
		t.Errorf("keeps %d contents, want at most %d", n, VersionCacheSize)
	}
}
