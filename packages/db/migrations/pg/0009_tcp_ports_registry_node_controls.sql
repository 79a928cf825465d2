CREATE TABLE "node_uptime_hours" (
	"node_id" text NOT NULL,
	"hour" integer NOT NULL,
	"online_ms" integer DEFAULT 0 NOT NULL
);
--> statement-breakpoint
CREATE TABLE "registry_credentials" (
	"id" text PRIMARY KEY NOT NULL,
	"user_id" text NOT NULL,
	"registry" text NOT NULL,
	"username" text NOT NULL,
	"secret_sealed" text NOT NULL,
	"created_at" bigint NOT NULL,
	"last_used_at" bigint
);
--> statement-breakpoint
ALTER TABLE "deployments" ADD COLUMN "tcp_ports" jsonb DEFAULT '[]'::jsonb NOT NULL;--> statement-breakpoint
ALTER TABLE "deployments" ADD COLUMN "registry_credential_id" text;--> statement-breakpoint
ALTER TABLE "nodes" ADD COLUMN "used_disk_gb" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "nodes" ADD COLUMN "maintenance_reason" text;--> statement-breakpoint
ALTER TABLE "nodes" ADD COLUMN "maintenance_since" bigint;--> statement-breakpoint
CREATE UNIQUE INDEX "node_uptime_hours_pk" ON "node_uptime_hours" USING btree ("node_id","hour");--> statement-breakpoint
CREATE INDEX "registry_credentials_user_idx" ON "registry_credentials" USING btree ("user_id","created_at");