package operator

import (
	"io"

	"github.com/go-logr/logr"
	uberzap "go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// NewLogger is the operator's logger: zap with the command line's options, writing to w, encoding values lazily.
func NewLogger(opts *zap.Options, w io.Writer) logr.Logger {
	return zap.New(zap.UseFlagOptions(opts), zap.WriteTo(w), lazyValues())
}

// lazyValues makes a logger encode the values added to it (WithValues) when
// it writes a line, not when they are added. controller-runtime adds the
// controller, the object and the reconcile ID to the logger of every
// reconcile and of every webhook request, and most of them write no line:
// encoding those values at once took a buffer each time, for nothing.
func lazyValues() zap.Opts {
	return zap.RawZapOpts(uberzap.WrapCore(func(c zapcore.Core) zapcore.Core { return lazyCore{c} }))
}

// lazyCore is a core whose With defers to the first line written.
type lazyCore struct{ zapcore.Core }

func (c lazyCore) With(fields []zapcore.Field) zapcore.Core {
	return lazyCore{zapcore.NewLazyWith(c.Core, fields)}
}
