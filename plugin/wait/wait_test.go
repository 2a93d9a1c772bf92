package wait

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/kubectl-trainjob/kubectl-trainjob/pkg/apis/trainer/v1alpha1"
	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
)

func TestParseTarget(t *testing.T) {
	tests := []struct {
		in      string
		want    target
		str     string
		wantErr string
	}{
		{in: "Complete", want: target{stage: stage.Complete}, str: "Complete"},
		{in: "training", want: target{stage: stage.Training}, str: "Training"},
		{in: "delete", want: target{deleted: true}, str: "deleted"},
		{in: "Deleted", want: target{deleted: true}, str: "deleted"},
		{in: "ComponentsCreated", want: target{condition: "ComponentsCreated", status: metav1.ConditionTrue}, str: "ComponentsCreated"},
		{in: "condition=Suspended", want: target{condition: "Suspended", status: metav1.ConditionTrue}, str: "Suspended"},
		{in: "condition=Suspended=False", want: target{condition: "Suspended", status: metav1.ConditionFalse}, str: "Suspended=False"},
		{in: "condition=Complete=Unknown", want: target{condition: "Complete", status: metav1.ConditionUnknown}, str: "Complete=Unknown"},
		{in: "condition=Suspended=false", wantErr: `invalid --for "condition=Suspended=false": a condition's status is True, False or Unknown`},
		{in: "condition=", wantErr: `invalid --for "condition=": use a stage (Pending, Suspended, Initializing, Training, Complete, Failed), a condition type, condition=TYPE[=STATUS] or delete`},
		{in: "jsonpath={.status}", wantErr: `invalid --for "jsonpath={.status}": use a stage`},
		{in: "", wantErr: `invalid --for "": use a stage`},
		{in: "queued", wantErr: `invalid --for "queued": wait reads the TrainJob alone, which does not tell Queued from Suspended`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseTarget(tt.in)
			if tt.wantErr != "" {
				if err == nil || len(err.Error()) < len(tt.wantErr) || err.Error()[:len(tt.wantErr)] != tt.wantErr {
					t.Fatalf("parseTarget(%q) = %+v, %v; want the error %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseTarget(%q): %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(target{})); diff != "" {
				t.Errorf("parseTarget(%q) (-want +got):\n%s", tt.in, diff)
			}
			if s := got.String(); s != tt.str {
				t.Errorf("String() = %q, want %q", s, tt.str)
			}
		})
	}
}

func withConditions(conds ...metav1.Condition) *trainer.TrainJob {
	tj := &trainer.TrainJob{}
	tj.Status.Conditions = conds
	return tj
}

func cond(typ string, status metav1.ConditionStatus) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: "Test", LastTransitionTime: metav1.NewTime(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))}
}

// TestTargetMet: the wait predicates, on a TrainJob or on none (gone).
func TestTargetMet(t *testing.T) {
	complete := withConditions(cond(trainer.TrainJobComplete, metav1.ConditionTrue))
	resumed := withConditions(cond(trainer.TrainJobSuspended, metav1.ConditionFalse))
	suspended := &trainer.TrainJob{Spec: trainer.TrainJobSpec{Suspend: ptr.To(true)}}
	training := &trainer.TrainJob{Status: trainer.TrainJobStatus{JobsStatus: []trainer.JobStatus{{Name: trainer.Node, Ready: ptr.To[int32](1)}}}}
	tests := []struct {
		name   string
		target target
		tj     *trainer.TrainJob
		want   bool
	}{
		{"stage reached", target{stage: stage.Complete}, complete, true},
		{"another stage", target{stage: stage.Complete}, training, false},
		{"stage of a TrainJob only suspended in its spec", target{stage: stage.Suspended}, suspended, true},
		{"stage of a TrainJob gone", target{stage: stage.Complete}, nil, false},
		{"deleted, and gone", target{deleted: true}, nil, true},
		{"deleted, still there", target{deleted: true}, complete, false},
		{"condition True", target{condition: trainer.TrainJobComplete, status: metav1.ConditionTrue}, complete, true},
		{"condition with another status", target{condition: trainer.TrainJobSuspended, status: metav1.ConditionTrue}, resumed, false},
		{"condition False", target{condition: trainer.TrainJobSuspended, status: metav1.ConditionFalse}, resumed, true},
		{"condition absent is not False", target{condition: trainer.TrainJobSuspended, status: metav1.ConditionFalse}, training, false},
		{"condition of a TrainJob gone", target{condition: trainer.TrainJobComplete, status: metav1.ConditionTrue}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.target.met(tt.tj); got != tt.want {
				t.Errorf("%v met = %v, want %v", tt.target, got, tt.want)
			}
		})
	}
}

// TestWantedAndConditionTargets: what the messages name, and whether a Complete TrainJob can still
// meet a target (a condition, or deletion) or not (a stage).
func TestWantedAndConditionTargets(t *testing.T) {
	tests := []struct {
		name          string
		targets       []target
		wanted        string
		waitsForLater bool
	}{
		{"a stage", []target{{stage: stage.Complete}}, "Complete", false},
		{"two stages", []target{{stage: stage.Complete}, {stage: stage.Failed}}, "Complete or Failed", false},
		{"a condition", []target{{condition: "Suspended", status: metav1.ConditionFalse}}, "Suspended=False", true},
		{"deletion", []target{{stage: stage.Training}, {deleted: true}}, "Training or deleted", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := &WaitOptions{targets: tt.targets}
			if got := o.wanted(); got != tt.wanted {
				t.Errorf("wanted() = %q, want %q", got, tt.wanted)
			}
			if got := o.waitsForCondition(); got != tt.waitsForLater {
				t.Errorf("waitsForCondition() = %v, want %v", got, tt.waitsForLater)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		o       WaitOptions
		wantErr string
	}{
		{"a target", WaitOptions{targets: []target{{stage: stage.Complete}}}, ""},
		{"no --for", WaitOptions{}, "--for is required: name a stage (e.g. --for=Complete), a condition or delete"},
		{"negative timeout", WaitOptions{targets: []target{{deleted: true}}, Timeout: -time.Second},
			"--timeout must not be negative (0 waits as long as it takes), not -1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			if err := tt.o.Validate(); err != nil {
				got = err.Error()
			}
			if got != tt.wantErr {
				t.Errorf("Validate() = %q, want %q", got, tt.wantErr)
			}
		})
	}
}
