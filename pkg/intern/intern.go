// Package intern keeps one copy of the strings that recur across the
// objects the operator caches: every TrainJob, JobSet and snapshot of a
// namespace repeats its name, every owner reference the TrainJob API
// version and kind, every condition the same types, reasons and messages.
// Decoding gives each object its own copy of each; interning them in the
// cache transform lets the cached objects share one. Strings are immutable,
// so sharing them is safe however the objects are used.
package intern

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// maxStrings bounds the table; when it is full, a random entry makes
	// room. Strings that recur come back at once; the rest only churn.
	maxStrings = 4096
	// maxLen is the longest string kept: longer ones are rarely repeated
	// (a message that quotes an error).
	maxLen = 256
)

var strs = Table[string, string]{Max: maxStrings}

// String returns the table's copy of s, making s that copy when there is
// none.
func String(s string) string {
	if s == "" || len(s) > maxLen {
		return s
	}
	if kept, ok := strs.Get(s); ok {
		return kept
	}
	strs.Add(s, s)
	return s
}

// Pointer interns the string p points to, in place.
func Pointer(p *string) {
	if p != nil {
		*p = String(*p)
	}
}

// ObjectMeta interns, in place, what an object's metadata shares with other
// objects': its namespace and the API version and kind of its owners.
// Names and UIDs are each object's own.
func ObjectMeta(obj metav1.Object) {
	if ns := obj.GetNamespace(); ns != "" {
		obj.SetNamespace(String(ns))
	}
	refs := obj.GetOwnerReferences()
	if len(refs) == 0 {
		return
	}
	for i := range refs {
		refs[i].APIVersion = String(refs[i].APIVersion)
		refs[i].Kind = String(refs[i].Kind)
	}
	// A typed object returns its own slice, and this is a no-op.
	obj.SetOwnerReferences(refs)
}

// Conditions interns, in place, the type, status, reason and message of
// each condition.
func Conditions(conds []metav1.Condition) {
	for i := range conds {
		c := &conds[i]
		c.Type = String(c.Type)
		c.Status = metav1.ConditionStatus(String(string(c.Status)))
		c.Reason = String(c.Reason)
		c.Message = String(c.Message)
	}
}
