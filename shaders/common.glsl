// Shared by every vkgpt shader: tensors are buffer references (device addresses) passed in push
// constants; the workgroup size is specialization constants 0, 1, 2.
#extension GL_EXT_buffer_reference : require

layout(buffer_reference, std430, buffer_reference_align = 4) buffer Floats { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Ints { int v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) buffer Vec4s { vec4 v[]; };

layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;

// Total number of invocations along x, for grid-stride loops over large tensors.
uint grid_stride_x()
{
    return gl_NumWorkGroups.x * gl_WorkGroupSize.x;
}
