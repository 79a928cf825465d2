ALTER TABLE "nodes" ADD COLUMN "egress_policy" text;--> statement-breakpoint
ALTER TABLE "nodes" ADD COLUMN "disk_default_gb" integer;