package xo

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Kind classifies an XO API failure. Callers branch on it (IsNotFound, IsBadResponse, or
// errors.As and Error.Kind), never on message text.
type Kind int

const (
	// KindNotFound is XO's JSON "no such <type> <id>" 404: the object is not in XO's store.
	KindNotFound Kind = iota + 1
	// KindUnauthorized is a 401: missing, invalid, expired or revoked token.
	KindUnauthorized
	// KindForbidden is a 403: the token's user lacks a privilege.
	KindForbidden
	// KindServerError is a 5xx or a 429.
	KindServerError
	// KindBadResponse is an answer the client cannot use: an unexpected status (such as an HTML
	// 404 from an unknown route, or a 400/422), an undecodable body, a truncated stream.
	KindBadResponse
	// KindUnavailable is a transport failure: connection refused or reset, TLS failure, timeout.
	KindUnavailable
)

// String returns the kind's name, used as a metric label value.
func (k Kind) String() string {
	switch k {
	case KindNotFound:
		return "not_found"
	case KindUnauthorized:
		return "unauthorized"
	case KindForbidden:
		return "forbidden"
	case KindServerError:
		return "server_error"
	case KindBadResponse:
		return "bad_response"
	case KindUnavailable:
		return "unavailable"
	}
	return "unknown"
}

// Error is a failed XO API call. It never carries the authentication token.
type Error struct {
	Kind Kind
	// Op names the call, e.g. "get vm" or "list vms".
	Op string
	// StatusCode is the HTTP status, 0 for transport failures.
	StatusCode int
	// Message is XO's "error" field, or a short description.
	Message string
	// Err is the underlying cause, if any.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("xo ")
	b.WriteString(e.Op)
	if e.StatusCode != 0 {
		fmt.Fprintf(&b, ": HTTP %d", e.StatusCode)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

func kindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return 0
}

// IsNotFound reports whether XO answered that the object does not exist in its store. Note that
// XO forgets every object of a pool it lost the connection to: not found alone proves nothing.
func IsNotFound(err error) bool { return kindOf(err) == KindNotFound }

// IsBadResponse reports an answer the client could not use.
func IsBadResponse(err error) bool { return kindOf(err) == KindBadResponse }

// errorBody is XO's JSON error shape. "error" is a string, except for request validation (422)
// where it is an object.
type errorBody struct {
	Error json.RawMessage `json:"error"`
	Data  struct {
		ID   string `json:"id"`
		Type string `json:"type"`
	} `json:"data"`
}

// maxMessage bounds how much of a server's answer goes into an error.
const maxMessage = 256

// statusError builds the typed error for a non-2xx answer.
func statusError(op string, status int, contentType string, body []byte) *Error {
	e := &Error{Op: op, StatusCode: status}
	msg, isJSON := parseErrorBody(contentType, body)
	e.Message = msg
	switch {
	case status == 404 && isJSON && strings.HasPrefix(msg, "no such "):
		e.Kind = KindNotFound
	case status == 401:
		e.Kind = KindUnauthorized
	case status == 403:
		e.Kind = KindForbidden
	case status == 429 || status >= 500:
		e.Kind = KindServerError
	default:
		e.Kind = KindBadResponse
		if status == 404 && !isJSON {
			e.Message = "unknown route (non-JSON 404): is the URL an XO server with the REST API?"
		}
	}
	return e
}

// parseErrorBody returns XO's error message and whether the body was XO's JSON error shape.
func parseErrorBody(contentType string, body []byte) (string, bool) {
	var eb errorBody
	if strings.Contains(contentType, "json") && json.Unmarshal(body, &eb) == nil && len(eb.Error) > 0 {
		var s string
		if json.Unmarshal(eb.Error, &s) == nil {
			return truncate(s), true
		}
		return truncate(string(eb.Error)), true
	}
	return truncate(strings.TrimSpace(firstLine(string(body)))), false
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func truncate(s string) string {
	if len(s) > maxMessage {
		return s[:maxMessage] + "…"
	}
	return s
}
