ALTER TABLE "deployments" ADD COLUMN "billed_ms" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "deployments" ADD COLUMN "removed_from_node_at" bigint;--> statement-breakpoint
CREATE INDEX "deployments_status_idx" ON "deployments" USING btree ("status");