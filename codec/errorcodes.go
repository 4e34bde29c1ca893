package codec

import (
	"errors"
	"fmt"
	"reflect"
)

// registeredError is a domain error and the code it is stored under.
type registeredError struct {
	code string
	err  error
}

// RegisterError gives the domain error err (a sentinel, such as
// ErrCardDeclined = errors.New("card declined")) the stable code it is
// recorded under, so that a rejection recorded with it (a command's
// recorded rejection, a saga's rejection step) reads back as an error
// that errors.Is matches with err: in the handler that takes it, on every
// later read, after restarts and in other processes. Only the code and
// the error's text are stored, never its Go identity, so register the
// same code for the same error in every process, and keep codes stable
// as you keep type names.
//
// An empty or malformed code (the rules of type names), one with the
// [ReservedPrefix], a nil error, or a code or error registered already is a
// [*RegistrationError], kept for [Registry.Validate] as Register's are.
// After the registry is frozen it returns [ErrFrozen].
func RegisterError(r *Registry, code string, err error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.frozen.Load() {
		return fmt.Errorf("register error %q: %w", code, ErrFrozen)
	}
	fail := func(reason string) error {
		e := &RegistrationError{Name: code, GoType: fmt.Sprintf("%T", err), Reason: reason}
		r.setupErrs = append(r.setupErrs, e)
		return e
	}
	if reason := checkName(code); reason != "" {
		return fail(reason)
	}
	if err == nil {
		return fail("the error is nil")
	}
	if !matchable(err) {
		return fail(fmt.Sprintf("errors.Is cannot match a %T: its value is not comparable and it has no Is method; register a sentinel or a pointer", err))
	}
	for _, e := range r.errs {
		switch {
		case e.code == code:
			return fail(fmt.Sprintf("the code is already registered for %q", e.err))
		case equalErrors(e.err, err):
			return fail(fmt.Sprintf("the error is already registered as %q", e.code))
		}
	}
	r.errs = append(r.errs, registeredError{code: code, err: err})
	return nil
}

// matchable reports whether errors.Is can match err as its target: its
// value compares with == (a comparable type can still hold a value that
// panics, such as a slice in an interface field), or it has an Is method.
func matchable(err error) bool {
	if _, is := err.(interface{ Is(error) bool }); is {
		return true
	}
	return reflect.TypeOf(err).Comparable() && equalErrors(err, err)
}

// equalErrors reports whether a == b, false where the comparison panics.
// It is how RegisterError tells one error value registered twice: not by
// errors.Is, under which an error that wraps another would count as it.
func equalErrors(a, b error) (eq bool) {
	defer func() {
		if recover() != nil {
			eq = false
		}
	}()
	return a == b
}

// isError is errors.Is(err, target), false where a value in err's chain
// panics when compared with target.
func isError(err, target error) (is bool) {
	defer func() {
		if recover() != nil {
			is = false
		}
	}()
	return errors.Is(err, target)
}

// ErrorCode returns the code of the most specific registered error that
// errors.Is finds in err, "" for none: of the registered errors err
// matches, the one that matches the most of the others (a registered
// ErrCardDeclined that wraps a registered ErrPaymentFailed is chosen over
// it, so that the error read back matches both), the first registered
// among equals (errors.Join of unrelated registered errors keeps one).
func (r *Registry) ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	if !r.frozen.Load() {
		r.mu.Lock()
		defer r.mu.Unlock()
	}
	var found []registeredError
	for _, e := range r.errs {
		if isError(err, e.err) {
			found = append(found, e)
		}
	}
	best, most := "", -1
	for _, e := range found {
		n := 0
		for _, o := range found {
			if isError(e.err, o.err) {
				n++
			}
		}
		if n > most {
			best, most = e.code, n
		}
	}
	return best
}

// ErrorOf returns the error recorded with text under code, as a reader
// of the record sees it: a [*CodedError] that wraps the error this code
// registered under code (none, for an empty code or one this code does
// not know: the text alone then).
func (r *Registry) ErrorOf(code, text string) *CodedError {
	e := &CodedError{Code: code, Text: text}
	if code == "" {
		return e
	}
	if !r.frozen.Load() {
		r.mu.Lock()
		defer r.mu.Unlock()
	}
	for _, reg := range r.errs {
		if reg.code == code {
			e.Err = reg.err
			break
		}
	}
	return e
}

// CodedError is an error read back from a record: the text it was
// recorded with, its code, and the error registered under that code, which
// errors.Is and errors.As see through Unwrap.
type CodedError struct {
	// Code is the code it was recorded under ("" for none), Text its text.
	Code, Text string
	// Err is the error this code registered under Code (nil for none).
	Err error
}

// Error returns the recorded text.
func (e *CodedError) Error() string { return e.Text }

// Unwrap returns the registered error, if any.
func (e *CodedError) Unwrap() error { return e.Err }
