import type { TemplateRow } from "@cm/db";

type Seed = Omit<TemplateRow, "sortOrder">;

/**
 * The template catalogue, seeded (and refreshed) at every start. Images are real,
 * public references; estimatedPullTimeS is the seconds a first pull takes on a
 * 1 Gbit/s link, from each image's compressed size.
 */
const seeds: Seed[] = [
  {
    id: "tpl_vllm", slug: "vllm-openai", name: "vLLM (OpenAI-compatible server)", category: "llm",
    description: "High-throughput LLM inference with an OpenAI-compatible API on port 8000. Set MODEL to a Hugging Face model id.",
    requiresGpu: true, minGpuVramMb: 16_384, containerImage: "vllm/vllm-openai:v0.6.4",
    defaultEnv: { MODEL: "Qwen/Qwen2.5-7B-Instruct", HF_HOME: "/root/.cache/huggingface" },
    ports: [{ internal: 8000, protocol: "http", description: "OpenAI-compatible API" }],
    minCpuCores: 4, minRamMb: 16_384, minDiskGb: 50, estimatedPullTimeS: 90,
  },
  {
    id: "tpl_ollama", slug: "ollama", name: "Ollama", category: "llm",
    description: "Run Llama, Mistral, Gemma and other open models with a simple REST API on port 11434.",
    requiresGpu: true, minGpuVramMb: 8_192, containerImage: "ollama/ollama:0.5.7",
    defaultEnv: { OLLAMA_HOST: "0.0.0.0:11434", OLLAMA_KEEP_ALIVE: "24h" },
    ports: [{ internal: 11434, protocol: "http", description: "Ollama REST API" }],
    minCpuCores: 2, minRamMb: 8_192, minDiskGb: 30, estimatedPullTimeS: 30,
  },
  {
    id: "tpl_tgi", slug: "text-generation-inference", name: "Text Generation Inference", category: "llm",
    description: "Hugging Face's production LLM server with streaming over server-sent events on port 80.",
    requiresGpu: true, minGpuVramMb: 24_576, containerImage: "ghcr.io/huggingface/text-generation-inference:3.0.1",
    defaultEnv: { MODEL_ID: "mistralai/Mistral-7B-Instruct-v0.3" },
    ports: [{ internal: 80, protocol: "http", description: "Generation API" }],
    minCpuCores: 4, minRamMb: 16_384, minDiskGb: 50, estimatedPullTimeS: 75,
  },
  {
    id: "tpl_comfyui", slug: "comfyui", name: "ComfyUI", category: "image",
    description: "Node-based Stable Diffusion and Flux workflows in the browser on port 8188.",
    requiresGpu: true, minGpuVramMb: 8_192, containerImage: "yanwk/comfyui-boot:cu124-slim",
    defaultEnv: { CLI_ARGS: "--listen 0.0.0.0" },
    ports: [{ internal: 8188, protocol: "http", description: "ComfyUI web interface" }],
    minCpuCores: 4, minRamMb: 16_384, minDiskGb: 40, estimatedPullTimeS: 60,
  },
  {
    id: "tpl_sd_webui", slug: "stable-diffusion-webui", name: "Stable Diffusion WebUI (AUTOMATIC1111)", category: "image",
    description: "The classic Stable Diffusion web interface for text-to-image and image-to-image on port 7860.",
    requiresGpu: true, minGpuVramMb: 8_192, containerImage: "universonic/stable-diffusion-webui:full",
    defaultEnv: { COMMANDLINE_ARGS: "--listen --api" },
    ports: [{ internal: 7860, protocol: "http", description: "Web interface and API" }],
    minCpuCores: 4, minRamMb: 16_384, minDiskGb: 40, estimatedPullTimeS: 80,
  },
  {
    id: "tpl_jupyter_pytorch", slug: "jupyter-pytorch", name: "Jupyter Lab with PyTorch (CUDA)", category: "notebook",
    description: "JupyterLab with PyTorch and CUDA 12 on port 8888. Set JUPYTER_TOKEN to choose your password.",
    requiresGpu: true, minGpuVramMb: 4_096, containerImage: "quay.io/jupyter/pytorch-notebook:cuda12-python-3.11",
    defaultEnv: { JUPYTER_TOKEN: "change-me", JUPYTER_ENABLE_LAB: "yes" },
    ports: [{ internal: 8888, protocol: "http", description: "JupyterLab" }],
    minCpuCores: 2, minRamMb: 8_192, minDiskGb: 20, estimatedPullTimeS: 45,
  },
  {
    id: "tpl_jupyter_scipy", slug: "jupyter-scipy", name: "Jupyter Lab (CPU, SciPy stack)", category: "notebook",
    description: "JupyterLab with NumPy, pandas, SciPy and matplotlib on port 8888; no GPU needed.",
    requiresGpu: false, minGpuVramMb: 0, containerImage: "quay.io/jupyter/scipy-notebook:python-3.11",
    defaultEnv: { JUPYTER_TOKEN: "change-me" },
    ports: [{ internal: 8888, protocol: "http", description: "JupyterLab" }],
    minCpuCores: 1, minRamMb: 2_048, minDiskGb: 10, estimatedPullTimeS: 25,
  },
  {
    id: "tpl_cuda_base", slug: "cuda-base", name: "CUDA 12.4 base (Ubuntu 22.04)", category: "utility",
    description: "A minimal NVIDIA CUDA runtime on Ubuntu for your own GPU workloads; sleeps until you exec into it.",
    requiresGpu: true, minGpuVramMb: 0, containerImage: "nvidia/cuda:12.4.1-base-ubuntu22.04",
    defaultEnv: { NVIDIA_DRIVER_CAPABILITIES: "compute,utility" },
    ports: [], minCpuCores: 1, minRamMb: 1_024, minDiskGb: 5, estimatedPullTimeS: 5,
  },
  {
    id: "tpl_ubuntu", slug: "ubuntu", name: "Ubuntu 22.04", category: "utility",
    description: "Plain Ubuntu for CPU jobs and tooling.",
    requiresGpu: false, minGpuVramMb: 0, containerImage: "ubuntu:22.04", defaultEnv: {},
    ports: [], minCpuCores: 1, minRamMb: 512, minDiskGb: 2, estimatedPullTimeS: 1,
  },
  {
    id: "tpl_python_http", slug: "python-web", name: "Python web app starter", category: "custom",
    description: "python:3.12-slim serving a folder on port 8000: a starting point for your own image.",
    requiresGpu: false, minGpuVramMb: 0, containerImage: "python:3.12-slim", defaultEnv: { PYTHONUNBUFFERED: "1" },
    ports: [{ internal: 8000, protocol: "http", description: "Your app" }],
    minCpuCores: 1, minRamMb: 512, minDiskGb: 2, estimatedPullTimeS: 3,
  },
];

export const TEMPLATE_SEED: TemplateRow[] = seeds.map((s, i) => ({ ...s, sortOrder: i }));
