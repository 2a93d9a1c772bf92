package intern

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func same(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

// TestString: equal strings come back as one copy, with their content; the empty string and long ones are left
// as they are; the table never holds more than maxStrings, however many distinct strings it is given, from many
// goroutines at once.
func TestString(t *testing.T) {
	a, b := strings.Clone("ComponentsCreated"), strings.Clone("ComponentsCreated")
	if same(a, b) {
		t.Fatal("the test's two strings already share their bytes")
	}
	if got := String(b); !same(String(a), got) || got != "ComponentsCreated" {
		t.Errorf("two equal strings interned: %q and %q, not one copy", String(a), got)
	}
	long := strings.Repeat("x", maxLen+1)
	if got := String(strings.Clone(long)); same(got, String(strings.Clone(long))) {
		t.Error("a string longer than maxLen was kept")
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range maxStrings {
				if s := fmt.Sprint(g, "-", i); String(s) != s {
					t.Errorf("String(%q) changed it", s)
				}
			}
		})
	}
	wg.Wait()
	if n := strs.Len(); n > maxStrings {
		t.Errorf("the table holds %d strings, want at most %d", strs.Len(), maxStrings)
	}
}

// TestObjectMetaAndConditions: the namespace, the owners' API version and kind and the conditions' strings of
// two objects end up shared, and keep their values; names and UIDs stay each object's own.
func TestObjectMetaAndConditions(t *testing.T) {
	object := func() (*metav1.ObjectMeta, []metav1.Condition) {
		m := &metav1.ObjectMeta{Name: strings.Clone("alpha"), Namespace: strings.Clone("ml"), UID: "uid",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: strings.Clone("trainer.kubeflow.org/v1alpha1"), Kind: strings.Clone("TrainJob"), Name: "alpha"}}}
		conds := []metav1.Condition{{Type: strings.Clone("Suspended"), Status: metav1.ConditionStatus(strings.Clone("True")),
			Reason: strings.Clone("Suspended"), Message: strings.Clone("TrainJob is suspended")}}
		return m, conds
	}
	m1, c1 := object()
	m2, c2 := object()
	for _, m := range []*metav1.ObjectMeta{m1, m2} {
		ObjectMeta(m)
	}
	Conditions(c1)
	Conditions(c2)
	for name, pair := range map[string][2]string{
		"namespace":         {m1.Namespace, m2.Namespace},
		"owner API version": {m1.OwnerReferences[0].APIVersion, m2.OwnerReferences[0].APIVersion},
		"owner kind":        {m1.OwnerReferences[0].Kind, m2.OwnerReferences[0].Kind},
		"condition type":    {c1[0].Type, c2[0].Type},
		"condition status":  {string(c1[0].Status), string(c2[0].Status)},
		"condition reason":  {c1[0].Reason, c2[0].Reason},
		"condition message": {c1[0].Message, c2[0].Message},
	} {
		if !same(pair[0], pair[1]) {
			t.Errorf("%s: two copies", name)
		}
	}
	if same(m1.Name, m2.Name) {
		t.Error("names were interned")
	}
	want, wantConds := object()
	if m1.Namespace != want.Namespace || m1.OwnerReferences[0] != want.OwnerReferences[0] || c1[0] != wantConds[0] {
		t.Errorf("values changed: %v %v", m1, c1)
	}
}
