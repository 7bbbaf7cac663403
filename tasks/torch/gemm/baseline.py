import torch


def run(A, B):
    return torch.matmul(A, B.T).to(torch.float16)


def ksearch_describe():
    """What this baseline runs, for the label its speedups are quoted against."""
    device = torch.device(globals().get("KSEARCH_DEVICE", "cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda":
        where = f"cuBLAS of CUDA {torch.version.cuda} on {torch.cuda.get_device_name(device)}"
    else:
        where = "the CPU"
    return f"torch.matmul, torch {torch.__version__}, {where}"
