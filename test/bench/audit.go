package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// auditPolicy records every request of a ServiceAccount (the operator's, and the CLI's of the benchmark) at
// Metadata level, once its response is complete; nothing else. The benchmark's own client and the JobSet
// controller use the administrator's certificate, so they are not recorded.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
  - level: Metadata
    userGroups: ["system:serviceaccounts"]
  - level: None
`

// auditEvent is what the benchmark reads of an audit.k8s.io/v1 Event.
type auditEvent struct {
	Stage string `json:"stage"`
	Verb  string `json:"verb"`
	User  struct {
		Username string `json:"username"`
	} `json:"user"`
	UserAgent  string `json:"userAgent"`
	RequestURI string `json:"requestURI"`
	ObjectRef  *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		APIGroup    string `json:"apiGroup"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceived time.Time `json:"requestReceivedTimestamp"`
}

// writeVerbs are the verbs that change an object.
var writeVerbs = []string{"create", "update", "patch", "delete", "deletecollection"}

func (e *auditEvent) isWrite() bool { return slices.Contains(writeVerbs, e.Verb) }

// isEvent reports whether the request is about an Event (core or events.k8s.io).
func (e *auditEvent) isEvent() bool { return e.ObjectRef != nil && e.ObjectRef.Resource == "events" }

func (e *auditEvent) namespace() string {
	if e.ObjectRef == nil {
		return ""
	}
	return e.ObjectRef.Namespace
}

func (e *auditEvent) failed() bool { return e.ResponseStatus != nil && e.ResponseStatus.Code >= 400 }

// key names what was done to what: "create jobsets.jobset.x-k8s.io", "patch trainjobs.trainer.kubeflow.org/status";
// a request without an object (discovery) is its verb and path.
func (e *auditEvent) key() string {
	if e.ObjectRef == nil {
		path, _, _ := strings.Cut(e.RequestURI, "?")
		return e.Verb + " " + path
	}
	r := e.ObjectRef.Resource
	if e.ObjectRef.APIGroup != "" {
		r += "." + e.ObjectRef.APIGroup
	}
	if e.ObjectRef.Subresource != "" {
		r += "/" + e.ObjectRef.Subresource
	}
	return e.Verb + " " + r
}

// auditLog reads the API server's audit log as it grows.
type auditLog struct {
	path   string
	offset int64
}

// next returns the events written since the last call (only whole lines).
func (l *auditLog) next() ([]auditEvent, error) {
	f, err := os.Open(l.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(l.offset, io.SeekStart); err != nil {
		return nil, err
	}
	r := bufio.NewReaderSize(f, 1<<20)
	var events []auditEvent
	for {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			return events, nil // a partial last line is read next time
		}
		if err != nil {
			return events, err
		}
		l.offset += int64(len(line))
		var e auditEvent
		if err := json.Unmarshal(line, &e); err != nil {
			return events, fmt.Errorf("audit log %s: %w", l.path, err)
		}
		events = append(events, e)
	}
}

// requestCounts counts events by key.
type requestCounts map[string]int

func (c requestCounts) total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// perObject divides every count by n.
func (c requestCounts) perObject(n int) map[string]float64 {
	out := map[string]float64{}
	for k, v := range c {
		out[k] = float64(v) / float64(n)
	}
	return out
}

// add sums other into c.
func (c requestCounts) add(other requestCounts) {
	for k, v := range other {
		c[k] += v
	}
}

// operatorRequests sorts the operator's requests in a namespace: object writes, event writes, reads, and
// failed writes.
type operatorRequests struct {
	writes, events, reads, failedWrites requestCounts
}

func newOperatorRequests() operatorRequests {
	return operatorRequests{writes: requestCounts{}, events: requestCounts{}, reads: requestCounts{}, failedWrites: requestCounts{}}
}

// add sums other into r.
func (r operatorRequests) add(other operatorRequests) {
	r.writes.add(other.writes)
	r.events.add(other.events)
	r.reads.add(other.reads)
	r.failedWrites.add(other.failedWrites)
}

// count adds the events of the users that isUser accepts in namespace ns.
func (r operatorRequests) count(events []auditEvent, isUser func(string) bool, ns string) {
	for i := range events {
		e := &events[i]
		if !isUser(e.User.Username) || e.namespace() != ns {
			continue
		}
		switch {
		case e.isEvent():
			r.events[e.key()]++
		case e.isWrite():
			r.writes[e.key()]++
			if e.failed() {
				r.failedWrites[e.key()]++
			}
		default:
			r.reads[e.key()]++
		}
	}
}
