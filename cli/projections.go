package cli

// ProjectionConsumer is one of the service's projections, as the
// projections and deadletters commands use it; [Projection] makes one from
// a projection consumer.
type ProjectionConsumer interface {
	consumerName() string
}
