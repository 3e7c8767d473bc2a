package member

// unjoin returns the errors joined in err (err itself when it joins none).
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func ptrTo[T any](v T) *T { return &v }
