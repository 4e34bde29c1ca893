package cli

// SagaRunner is one of the service's saga types, as the sagas commands
// use it; [Saga] makes one from a saga runner.
type SagaRunner interface {
	sagaName() string
}
