package aggregate

import (
	"context"
	"reflect"

	"github.com/cairn-es/cairn/internal/busrepo"
)

// The command bus reaches what it alone needs of a repository (outcome
// lookups, refresh, saves that record the command's type and rejections)
// through internal/busrepo, so that none of it is in this package's API.
func init() {
	busrepo.Register(
		func(repo any) any { return repo.(interface{ busView() any }).busView() },
		func(typ any, ct reflect.Type) bool {
			return typ.(interface{ canHandle(reflect.Type) bool }).canHandle(ct)
		},
	)
}

// busView is a repository as the bus sees it: a [busrepo.Repo] of its
// instances.
type busView[T any, PT Root[T]] struct{ r *Repository[T, PT] }

var _ busrepo.Repo[*Instance[struct{}, *struct{}]] = busView[struct{}, *struct{}]{}

func (r *Repository[T, PT]) busView() any { return busView[T, PT]{r} }

func (v busView[T, PT]) Load(ctx context.Context, id, stream string) (*Instance[T, PT], error) {
	return v.r.load(ctx, id, stream)
}

func (v busView[T, PT]) Refresh(ctx context.Context, inst *Instance[T, PT]) (*Instance[T, PT], error) {
	return v.r.refresh(ctx, inst)
}

func (v busView[T, PT]) PriorOutcome(ctx context.Context, inst *Instance[T, PT], commandID string) (busrepo.Outcome, bool, error) {
	return v.r.priorOutcome(ctx, inst, commandID)
}

func (v busView[T, PT]) RecentOutcome(ctx context.Context, inst *Instance[T, PT], commandID string) (busrepo.Outcome, bool, bool, error) {
	return v.r.recentOutcome(ctx, inst, commandID)
}

func (v busView[T, PT]) Save(ctx context.Context, inst *Instance[T, PT], events []any, opts busrepo.SaveOptions) (busrepo.Outcome, error) {
	return v.r.save(ctx, inst, events, &opts, true) // a step of the bus's dispatch
}

func (v busView[T, PT]) SaveRejection(ctx context.Context, inst *Instance[T, PT], rej busrepo.Rejection, opts busrepo.SaveOptions) (busrepo.Outcome, error) {
	return v.r.saveRejection(ctx, inst, rej, opts)
}
