// Command s3-delete lets a clean-up agent delete objects from an S3-style store.
//
// The policy lets it delete scratch objects on its own, puts a delete in the production
// assets bucket before a person, and denies anything in the backups bucket. The object store
// is an in-memory fake that records every delete it performs. A delete that is asked twice
// (the agent's plan lists the object twice) is refused the second time as already committed.
//
// Unguarded (LATCH_EXAMPLE_UNGUARDED=1) the agent deletes the backup and the production asset
// without anyone being asked: the recipe exits 1.
package main

import (
	"context"
	"errors"
	"sync"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/examples/cookbook/internal/recipe"
)

const policyYAML = `
schema: latch.policy/v1
actions:
  s3.delete_object:
    effect: "s3-delete:{bucket}/{key}"
    resource: "s3:{bucket}/{key}"
    arguments:
      bucket: { type: string }
      key: { type: string }
    rules:
      - when: { bucket_eq: backups }
        decision: deny
      - when: { bucket_eq: scratch }
        decision: allow
      - when: { bucket_eq: prod-assets }
        decision: approve
      - decision: deny
`

// Object names an object.
type Object struct {
	Bucket string `json:"bucket"`
	Key    string `json:"key"`
}

// bucketStore is the fake object store.
type bucketStore struct {
	mu      sync.Mutex
	objects map[Object]bool
	deletes []Object
}

func (s *bucketStore) delete(_ context.Context, o Object) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.objects, o)
	s.deletes = append(s.deletes, o)
	return "204 No Content", nil
}

func main() {
	recipe.Run("s3-delete", policyYAML, func(ctx context.Context, k *recipe.Kitchen) error {
		s3 := &bucketStore{objects: map[Object]bool{
			{"scratch", "tmp/report-1.csv"}: true, {"prod-assets", "img/old-logo.png"}: true, {"backups", "db/2026-12-01.dump"}: true,
		}}
		del := latch.Protect(k.Guard, "s3.delete_object", s3.delete, nil)
		if err := k.Guard.Check(); err != nil {
			return err
		}
		if k.Unguarded {
			del = s3.delete
		}
		ctx = latch.WithPrincipal(ctx, latch.Principal{Agent: "cleanup-agent"})

		plan := []Object{{"scratch", "tmp/report-1.csv"}, {"prod-assets", "img/old-logo.png"}, {"backups", "db/2026-12-01.dump"}, {"scratch", "tmp/report-1.csv"}}
		reasons := map[int]string{}
		var asked *latch.ApprovalRequiredError
		for i, o := range plan {
			_, err := del(ctx, o)
			reasons[i] = recipe.Reason(err)
			k.Say("delete s3://%s/%s: %s", o.Bucket, o.Key, recipe.Word(err, "deleted"))
			if errors.As(err, &asked) {
				// A person looks at the request and grants it; the agent presents the approval.
				if _, err := k.Guard.Approve(ctx, asked.ApprovalID, "dana"); err != nil {
					return err
				}
				_, err = del(latch.WithApproval(ctx, asked.ApprovalID), o)
				k.Say("  dana approved %s; delete s3://%s/%s again: %s", asked.ApprovalID, o.Bucket, o.Key, recipe.Word(err, "deleted"))
				k.Expect(err == nil, "the approved delete = %v, want it to run", err)
			}
		}
		if !k.Unguarded {
			k.Expect(reasons[1] == string(latch.ReasonApprovalRequired), "the production delete was refused %q, want approval_required", reasons[1])
			k.Expect(reasons[2] == string(latch.ReasonDenied), "the backup delete was refused %q, want denied", reasons[2])
			k.Expect(reasons[3] == string(latch.ReasonCommitted), "the repeated delete was refused %q, want committed", reasons[3])
		}
		s3.mu.Lock()
		defer s3.mu.Unlock()
		k.Say("object store deletes: %d, backup still there: %v", len(s3.deletes), s3.objects[Object{"backups", "db/2026-12-01.dump"}])
		k.Expect(s3.objects[Object{"backups", "db/2026-12-01.dump"}], "the backup was deleted")
		k.Expect(len(s3.deletes) == 2, "the store performed %d deletes, want 2 (scratch, then the approved asset)", len(s3.deletes))
		return nil
	})
}
