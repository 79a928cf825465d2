ALTER TABLE "deployments" ADD COLUMN "gpu_count" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "deployments" ADD COLUMN "cpu_millicores" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "deployments" ADD COLUMN "memory_mb" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "deployments" ADD COLUMN "disk_gb" integer;--> statement-breakpoint
ALTER TABLE "nodes" ADD COLUMN "used_gpus" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "nodes" ADD COLUMN "used_cpu_millicores" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "nodes" ADD COLUMN "used_memory_mb" integer DEFAULT 0 NOT NULL;