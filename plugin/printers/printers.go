// Package printers holds the human output the plugin's commands share: kubectl-style aligned tables for
// multi-section screens, ages and durations, transition lines and stage colours. It only formats and writes
// to the writers it is given; it never talks to the API server. Lists of API objects go through cli-runtime's
// printers instead (metav1.Table), as kubectl get does; the tables of a screen that is not a resource list (the
// sections of `status`) are tablewriter's, drawn borderless with kubectl's spacing so that they read alike.
// describe-pipeline's view is a tree, not a table, and is written as text. Whether a stream is a terminal is
// told by kubectl's util/term; a screen that a command redraws (status -w) clears what is below the cursor
// instead of sizing itself to the terminal, so it needs no resize events.
package printers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	cliprinters "k8s.io/cli-runtime/pkg/printers"
	"k8s.io/kubectl/pkg/util/term"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-trainjob/kubectl-trainjob/pkg/stage"
)

// None is what a cell shows when there is no value, as in kubectl.
const None = "-"

// Table writes aligned columns with kubectl's spacing (three blanks between columns, no trailing blanks).
// Cells are escaped: a message from the cluster cannot move the cursor or recolour the terminal.
type Table struct {
	out    io.Writer
	indent string
	rows   [][]string
}

// NewTable starts a table on out, indented by indent, with a header row unless headers is empty.
func NewTable(out io.Writer, indent string, headers ...string) *Table {
	t := &Table{out: out, indent: indent}
	if len(headers) > 0 {
		t.Row(headers...)
	}
	return t
}

// Row adds a row; empty cells show None.
func (t *Table) Row(cells ...string) {
	escaped := make([]string, len(cells))
	for i, c := range cells {
		if c == "" {
			c = None
		}
		escaped[i] = Escape(c)
	}
	t.rows = append(t.rows, escaped)
}

// columnGap is kubectl's space between columns (cli-runtime's tab writer pads cells with three blanks).
const columnGap = "   "

// Flush writes the table out. The header is a row like the others, as in kubectl: no rule, no borders, no
// change of case.
func (t *Table) Flush() error {
	if len(t.rows) == 0 {
		return nil
	}
	width := 0
	for _, r := range t.rows {
		width = max(width, len(r))
	}
	var buf bytes.Buffer
	cells := tw.CellConfig{
		Formatting: tw.CellFormatting{AutoFormat: tw.Off, AutoWrap: tw.WrapNone},
		Alignment:  tw.CellAlignment{Global: tw.AlignLeft},
		Padding:    tw.CellPadding{Global: tw.Padding{Right: columnGap, Overwrite: true}},
	}
	table := tablewriter.NewTable(&buf,
		tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{
			Borders: tw.BorderNone,
			Symbols: tw.NewSymbols(tw.StyleNone),
			Settings: tw.Settings{
				Separators: tw.Separators{BetweenRows: tw.Off, BetweenColumns: tw.Off, ShowHeader: tw.Off, ShowFooter: tw.Off},
				Lines:      tw.Lines{ShowTop: tw.Off, ShowBottom: tw.Off, ShowHeaderLine: tw.Off, ShowFooterLine: tw.Off},
			},
		})),
		tablewriter.WithConfig(tablewriter.Config{Row: cells}),
		tablewriter.WithTrimSpace(tw.Off),
	)
	for _, r := range t.rows {
		row := make([]any, width)
		for i := range row {
			if i < len(r) {
				row[i] = r[i]
			} else {
				row[i] = ""
			}
		}
		if err := table.Append(row...); err != nil {
			return err
		}
	}
	if err := table.Render(); err != nil {
		return err
	}
	t.rows = nil
	var out strings.Builder
	for line := range strings.Lines(buf.String()) {
		out.WriteString(t.indent + strings.TrimRight(line, " \n") + "\n")
	}
	_, err := io.WriteString(t.out, out.String())
	return err
}

// Escape makes text from the cluster safe to print on a terminal and keeps it on one line.
func Escape(s string) string {
	s = strings.NewReplacer("\n", " ", "\t", " ", "\f", " ").Replace(s)
	return cliprinters.EscapeTerminal(s)
}

// Age is how long ago t was, as kubectl's AGE column shows it; None when t is unset.
func Age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return None
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// Duration is d as kubectl shows durations (2m30s, 5h, 3d), None when negative.
func Duration(d time.Duration) string {
	if d < 0 {
		return None
	}
	return duration.HumanDuration(d)
}

// Delta is d as an offset from a start, "+1m30s"; None when negative.
func Delta(d time.Duration) string {
	if d < 0 {
		return None
	}
	return "+" + duration.HumanDuration(d)
}

// Clock is t in the local time zone as HH:MM:SS, or None when unset.
func Clock(t metav1.Time) string {
	if t.IsZero() {
		return None
	}
	return t.Local().Format(time.TimeOnly)
}

// Timestamp is t in the local time zone as RFC 3339, or None when unset.
func Timestamp(t metav1.Time) string {
	if t.IsZero() {
		return None
	}
	return t.Local().Format(time.RFC3339)
}

// Transition is one line of a followed TrainJob: its stage changed, or something new happened to it.
type Transition struct {
	// Time is when it happened; Since is how long after the TrainJob's creation.
	Time  metav1.Time
	Since time.Duration
	// Subject is what changed (the stage, a condition, an event's reason); Text says how.
	Subject string
	Text    string
}

// WriteTransition writes t as one line: "HH:MM:SS  (+Δ)  subject  text".
func WriteTransition(w io.Writer, t Transition, color bool) error {
	line := fmt.Sprintf("%s  %-8s  %s", Clock(t.Time), Delta(t.Since), Colorize(t.Subject, color))
	if t.Text != "" {
		line += "  " + Escape(t.Text)
	}
	_, err := fmt.Fprintln(w, line)
	return err
}

// ANSI colours for stage names.
const (
	red    = "\x1b[31m"
	green  = "\x1b[32m"
	yellow = "\x1b[33m"
	blue   = "\x1b[34m"
	reset  = "\x1b[0m"
)

// Colorize colours the stage name that s begins with, when color is set: green Complete, red Failed,
// yellow Pending, Queued and Suspended, blue Initializing and Training. Other text is left as it is.
func Colorize(s string, color bool) string {
	if !color {
		return s
	}
	for _, st := range stage.WithQueued {
		if strings.HasPrefix(s, string(st)) {
			return stageColor(st) + string(st) + reset + s[len(st):]
		}
	}
	return s
}

func stageColor(s stage.Stage) string {
	switch s {
	case stage.Complete:
		return green
	case stage.Failed:
		return red
	case stage.Pending, stage.Queued, stage.Suspended:
		return yellow
	}
	return blue
}

// ClearScreen moves the cursor home and erases what is below it: a watch redraws its frame in place without
// pushing earlier frames into the scrollback.
const ClearScreen = "\x1b[H\x1b[J"

// IsTerminal tells whether w is a terminal, as kubectl's util/term tells it: every command that asks (the
// prompts of delete and install --uninstall, status -w's redraw) asks here.
func IsTerminal(w any) bool { return term.IsTerminal(w) }

// Taint is how kubectl writes a taint: key=value:effect, or key:effect without a value.
func Taint(t corev1.Taint) string {
	if t.Value == "" {
		return t.Key + ":" + string(t.Effect)
	}
	return t.Key + "=" + t.Value + ":" + string(t.Effect)
}

// Document writes v as a document in format: json (indented by four blanks) or yaml. The summaries of status
// and fit print so.
func Document(w io.Writer, format string, v any) error {
	var data []byte
	var err error
	switch format {
	case "json":
		data, err = json.MarshalIndent(v, "", "    ")
		data = append(data, '\n')
	case "yaml":
		data, err = yaml.Marshal(v)
	default:
		return fmt.Errorf("unsupported output format %q: use json or yaml", format)
	}
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}
