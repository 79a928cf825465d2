ALTER TABLE "nodes" DROP COLUMN "online_since";--> statement-breakpoint
ALTER TABLE "nodes" DROP COLUMN "online_ms_total";