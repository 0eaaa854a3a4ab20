package netlink

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// asser has an As method that fills a *Error.
type asser struct{}

func (asser) Error() string { return "asser" }
func (asser) As(target any) bool {
	if p, ok := target.(**Error); ok {
		*p = &Error{Errno: unix.EPERM, Message: "from As"}
		return true
	}
	return false
}

// TestAsLikeErrors holds As to errors.As on error trees of every shape:
// plain, wrapped, joined, several %w, an As method, nothing to find.
func TestAsLikeErrors(t *testing.T) {
	ne := &Error{Errno: unix.ENOENT, Message: "m"}
	trees := []error{
		nil, ne, unix.EBUSY, errors.New("x"), fmt.Errorf("a: %w", ne), fmt.Errorf("a: %w", fmt.Errorf("b: %w", unix.EINVAL)),
		errors.Join(errors.New("x"), fmt.Errorf("c: %w", ne)), fmt.Errorf("%w and %w", unix.EAGAIN, ne),
		os.NewSyscallError("recvfrom", unix.EINTR), asser{}, fmt.Errorf("d: %w", asser{}), errors.Join(nil, errors.New("y")),
		&os.PathError{Op: "open", Path: "p", Err: unix.ENOENT},
	}
	for _, err := range trees {
		var want *Error
		okWant := errors.As(err, &want)
		got, ok := As[*Error](err)
		if ok != okWant || ok && (got.Errno != want.Errno || got.Message != want.Message) {
			t.Errorf("As[*Error](%v) = %v, %v; errors.As gives %v, %v", err, got, ok, want, okWant)
		}
		var wantErrno unix.Errno
		okWant = errors.As(err, &wantErrno)
		gotErrno, ok := As[unix.Errno](err)
		if ok != okWant || gotErrno != wantErrno {
			t.Errorf("As[unix.Errno](%v) = %v, %v; errors.As gives %v, %v", err, gotErrno, ok, wantErrno, okWant)
		}
	}
}
