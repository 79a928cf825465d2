ALTER TABLE `deployments` ADD `gpu_count` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `deployments` ADD `cpu_millicores` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `deployments` ADD `memory_mb` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `deployments` ADD `disk_gb` integer;--> statement-breakpoint
ALTER TABLE `nodes` ADD `used_gpus` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `nodes` ADD `used_cpu_millicores` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `nodes` ADD `used_memory_mb` integer DEFAULT 0 NOT NULL;