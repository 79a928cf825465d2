ALTER TABLE "deployments" ADD COLUMN "command" jsonb;--> statement-breakpoint
ALTER TABLE "deployments" ADD COLUMN "entrypoint" jsonb;--> statement-breakpoint
ALTER TABLE "deployments" ADD COLUMN "restart_policy" text DEFAULT 'no' NOT NULL;--> statement-breakpoint
ALTER TABLE "deployments" ADD COLUMN "max_restarts" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "deployments" ADD COLUMN "restart_count" integer DEFAULT 0 NOT NULL;